package dev.brook.junit;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ExtensionContextException;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.jupiter.api.extension.TestInstancePostProcessor;
import org.junit.platform.commons.support.AnnotationSupport;
import org.junit.platform.commons.support.HierarchyTraversalMode;
import org.junit.platform.commons.support.ModifierSupport;
import org.junit.platform.commons.support.ReflectionSupport;

/**
 * The JUnit 5 side of {@link BrookCluster}: one cluster per test class, kept in the class's extension store (which
 * closes it after the class), injected into {@link Brook} fields and parameters.
 */
public final class BrookExtension implements BeforeAllCallback, TestInstancePostProcessor, ParameterResolver {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(BrookExtension.class);

    /** The store's handle: closing the store closes the cluster. */
    private record Handle(Brook brook) implements ExtensionContext.Store.CloseableResource {
        @Override
        public void close() {
            brook.close();
        }
    }

    @Override
    public void beforeAll(ExtensionContext context) throws IllegalAccessException {
        Class<?> testClass = context.getRequiredTestClass();
        Brook brook = cluster(context);
        for (Field f : brookFields(testClass)) {
            if (ModifierSupport.isStatic(f)) {
                f.setAccessible(true);
                f.set(null, brook);
            }
        }
    }

    @Override
    public void postProcessTestInstance(Object instance, ExtensionContext context) throws IllegalAccessException {
        Brook brook = cluster(context);
        for (Field f : brookFields(instance.getClass())) {
            if (!ModifierSupport.isStatic(f)) {
                f.setAccessible(true);
                f.set(instance, brook);
            }
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext p, ExtensionContext context) {
        return p.getParameter().getType() == Brook.class;
    }

    @Override
    public Object resolveParameter(ParameterContext p, ExtensionContext context) {
        return cluster(context);
    }

    /** The class's cluster, started on first use. */
    private static Brook cluster(ExtensionContext context) {
        ExtensionContext classContext = classContext(context);
        Class<?> testClass = classContext.getRequiredTestClass();
        return classContext.getStore(NS)
            .getOrComputeIfAbsent(testClass, c -> new Handle(start(testClass)), Handle.class).brook();
    }

    /** The outermost context that is still a class's (nested classes share their enclosing class's cluster). */
    private static ExtensionContext classContext(ExtensionContext context) {
        ExtensionContext c = context;
        while (c.getTestMethod().isPresent() && c.getParent().isPresent()) c = c.getParent().get();
        while (c.getParent().flatMap(ExtensionContext::getTestClass).isPresent()
            && settings(c.getRequiredTestClass()).isEmpty()) {
            c = c.getParent().get();
        }
        return c;
    }

    private static Brook start(Class<?> testClass) {
        BrookCluster s = settings(testClass).orElseThrow(() -> new ExtensionContextException(
            "no @BrookCluster on " + testClass.getName() + " or on a static Brook field of it"));
        Brook.Builder b = Brook.cluster().nodes(s.nodes()).readyTimeout(Duration.ofSeconds(s.readyTimeoutSeconds()));
        for (String kv : s.config()) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new BrookException("@BrookCluster config entry " + kv + " is not key=value");
            b.withConfig(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
        }
        for (String t : s.topics()) b.topic(t);
        return b.start();
    }

    /** The class's @BrookCluster, else that of a static Brook field. */
    private static Optional<BrookCluster> settings(Class<?> testClass) {
        Optional<BrookCluster> onClass = AnnotationSupport.findAnnotation(testClass, BrookCluster.class);
        if (onClass.isPresent()) return onClass;
        return AnnotationSupport.findAnnotatedFields(testClass, BrookCluster.class, f -> Modifier.isStatic(f.getModifiers()))
            .stream().findFirst().flatMap(f -> AnnotationSupport.findAnnotation(f, BrookCluster.class));
    }

    private static List<Field> brookFields(Class<?> testClass) {
        return ReflectionSupport.findFields(testClass, f -> f.getType() == Brook.class,
            HierarchyTraversalMode.TOP_DOWN);
    }
}
