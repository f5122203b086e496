# The SASL listener franz-go's SASL tests (TestSCRAMAuth, TestSCRAMAuthBadCredentials,
# TestOAuthAuth) log in to, as server.properties keys: sourced by scripts/franz-go-suite (a
# one-node Brook beside its cluster) and by scripts/differential (a one-node Kafka 4.4 beside
# its cluster), so both brokers start from the same settings. Not executable: sourced.
#
# SASL_PROPERTIES: every setting but the node's own `listeners` (ports differ: Brook binds
# port 0, the reference Kafka fixed ports). PLAINTEXT stays the inter-broker listener, so no
# `sasl.mechanism.inter.broker.protocol` and no broker login is needed. A SASL listener needs
# the CONTROLLER entry in the map (Kafka adds it by default only when nothing uses SASL).
# SCRAM-SHA-256 users live in the metadata log (no JAAS users); OAUTHBEARER with no server
# callback handler class is Kafka's default unsecured-JWS validator
# (OAuthBearerUnsecuredValidatorCallbackHandler), whose login module option makes the broker's
# own token at start-up, so it names a subject.
SASL_PROPERTIES=(
  'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT'
  'listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256,OAUTHBEARER'
  'listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;'
  'listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";'
)
# The SCRAM user, created before the first start as `kafka-storage format --add-scram` (and
# `brook format --add-scram`) creates it; franz-go reads it as KGO_TEST_SCRAM=user:password
# (SHA-256).
SASL_SCRAM_USER=franz
SASL_SCRAM_PASSWORD=franz-secret
SASL_ADD_SCRAM="SCRAM-SHA-256=[name=$SASL_SCRAM_USER,password=$SASL_SCRAM_PASSWORD]"
