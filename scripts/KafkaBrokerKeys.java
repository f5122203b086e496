// Prints Kafka's broker config keys, as its KafkaConfig ConfigDef declares them, as the TSV
// rows of broker/src/kafka_broker_keys.tsv: name, type, default (<null> for a null default,
// <none> for a required key), and whether DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS holds it.
// Internal keys (ConfigDef.defineInternal) are left out: DescribeConfigs does not list them.
// Run by scripts/gen-kafka-broker-keys against the reference jars.
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.config.ConfigDef;

public class KafkaBrokerKeys {
    public static void main(String[] args) {
        ConfigDef def = kafka.server.KafkaConfig$.MODULE$.configDef();
        Set<String> dynamic = org.apache.kafka.server.config.DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS;
        for (ConfigDef.ConfigKey k : new TreeMap<>(def.configKeys()).values()) {
            if (k.internalConfig) {
                continue;
            }
            String value;
            if (k.defaultValue == ConfigDef.NO_DEFAULT_VALUE) {
                value = "<none>";
            } else if (k.defaultValue == null) {
                value = "<null>";
            } else {
                value = ConfigDef.convertToString(k.defaultValue, k.type);
            }
            System.out.println(k.name + "\t" + k.type + "\t" + value + "\t" + dynamic.contains(k.name));
        }
    }
}
