// Prints the APIs a Kafka 4.4 broker listener serves, as the TSV rows of docs/kafka-apis.tsv:
// key, name (as Brook's dispatcher spells it), oldest version, newest stable version, and
// whether a KRaft controller listener serves it too. Read from the reference jars' ApiKeys
// (the same table Kafka's ApiVersionsResponse is built from). Run by scripts/gen-kafka-apis.
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiKeys;

public class KafkaApis {
    public static void main(String[] args) {
        for (ApiKeys k : ApiKeys.values()) {
            if (!k.inScope(ApiMessageType.ListenerType.BROKER)) {
                continue;
            }
            StringBuilder name = new StringBuilder();
            for (String word : k.messageType.name().split("_")) {
                name.append(word.charAt(0)).append(word.substring(1).toLowerCase());
            }
            boolean controller = k.inScope(ApiMessageType.ListenerType.CONTROLLER);
            System.out.println(k.id + "\t" + name + "\t" + k.oldestVersion() + "\t"
                + k.latestVersion(false) + "\t" + controller);
        }
    }
}
