// Kafka 4.4's own produce quota (org.apache.kafka.server.quota.ClientQuotaManager, its Sensor,
// Rate and SampledStat) driven on a simulated clock by a client that sends REQUEST_BYTES and
// then waits exactly the throttle time it is given (at least GAP_MS) before its next request,
// as librdkafka does with a Produce answer's throttle_time_ms. Brook's unit test
// `quota::tests::a_client_waiting_out_its_throttle_sees_kafkas_throttle_times` holds Brook's
// ClientQuotaManager to what this prints. Run with the Kafka jars on the class path in
// source-launcher mode (no build step):
//   java -cp 'target/kafka-reference/lib/*' benches/compare/QuotaModel.java QUOTA REQUEST_BYTES GAP_MS SECONDS
// with quota.window.num 11 and quota.window.size.seconds 1 (Kafka's defaults). Prints each
// second's acknowledged bytes as a multiple of the quota, then each throttled request's index
// (from 0) and throttle time in ms ("throttled 10:1000,11:2000,...").
import java.net.InetAddress;
import java.util.Optional;
import java.util.StringJoiner;
import java.util.function.Supplier;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Quota;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;
import org.apache.kafka.server.quota.ClientQuotaManager;
import org.apache.kafka.server.quota.QuotaType;

public class QuotaModel {
    /** A clock that moves only when the client waits (kafka-clients' MockTime is in its test jar). */
    static final class SimulatedTime implements Time {
        long ms = 1_000_000;

        public long milliseconds() { return ms; }
        public long nanoseconds() { return ms * 1_000_000; }
        public void sleep(long d) { ms += d; }
        public void waitObject(Object o, Supplier<Boolean> done, long deadlineMs) {
            throw new UnsupportedOperationException();
        }
    }

    public static void main(String[] a) throws Exception {
        long quota = Long.parseLong(a[0]), request = Long.parseLong(a[1]), gap = Long.parseLong(a[2]);
        int seconds = Integer.parseInt(a[3]);
        SimulatedTime time = new SimulatedTime();
        Metrics metrics = new Metrics(time);
        ClientQuotaManager m = new ClientQuotaManager(
            new ClientQuotaManagerConfig(11, 1), metrics, QuotaType.PRODUCE, time, "");
        m.updateQuota(Optional.empty(), Optional.of(new ClientQuotaManager.ClientIdEntity("c")),
            Optional.of(Quota.upperBound(quota)));
        Session s = new Session(KafkaPrincipal.ANONYMOUS, InetAddress.getLoopbackAddress());
        long start = time.milliseconds();
        long[] acked = new long[seconds];
        StringJoiner throttled = new StringJoiner(",");
        int n = 0;
        while (time.milliseconds() - start < seconds * 1000L) {
            long now = time.milliseconds();
            int t = m.recordAndGetThrottleTimeMs(s, "c", request, now);
            acked[(int) ((now - start) / 1000)] += request;
            if (t > 0) throttled.add(n + ":" + t);
            n++;
            time.sleep(Math.max(t, gap));
        }
        for (int i = 0; i < seconds; i++) System.out.printf("second %d %.3f%n", i, (double) acked[i] / quota);
        System.out.println("throttled " + throttled);
        m.shutdown();
        metrics.close();
    }
}
