package io.lakebus.connect.sink;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Ends a dead predecessor's open transaction before a sink task's consumer asks for its offsets.
 *
 * <p>Why: a sink task answers each commit cycle in one Kafka transaction on its worker
 * transactional id ({@code worker-txn-<connector id>-<task>}): its {@code DataWritten} events and
 * the source offsets they cover ({@code sendOffsetsToTransaction}). A worker killed inside that
 * transaction leaves the offsets pending in the sink's consumer group. The task's successor cannot
 * read its committed offsets while they are pending (the consumer asks for stable offsets and
 * retries), and the sink's own producer, whose {@code initTransactions} would abort the
 * transaction at once, is created only after those offsets are read. So the successor waits for
 * the transaction coordinator to abort it on {@code transaction.timeout.ms} (60 s by default).
 * Measured on lakebus's cluster profile with both cores busy: a kill in that window gave the
 * first new rows after 77.5 s instead of ~28 s.
 *
 * <p>Here the task, when Connect starts it and before its consumer subscribes, initialises a
 * producer on the same transactional id and closes it: Kafka fences the predecessor's producer
 * and aborts its open transaction, so the offsets are stable again by the time the consumer reads
 * them. Nothing is lost: an aborted answer's offsets were never committed, so its records are
 * read and written again. A failure is logged and the task starts as the sink would without it
 * (its successor then waits out the timeout, as before).
 */
final class WorkerTransactionFence {

  private static final Logger LOG = LoggerFactory.getLogger(WorkerTransactionFence.class);
  /** How long the fence may block the task's start (the transaction coordinator unreachable). */
  static final Duration MAX_BLOCK = Duration.ofSeconds(20);

  /** Initialises transactions on one transactional id: the only Kafka call the fence makes. */
  interface Fencer {
    void initTransactions(String transactionalId) throws Exception;
  }

  private WorkerTransactionFence() {}

  /** The worker transactional id the sink's task uses (its channel's {@code prefix + "worker" + suffix}). */
  static String workerTransactionalId(String prefix, String suffix) {
    return (prefix == null ? "" : prefix) + "worker" + suffix;
  }

  /**
   * Fences {@code transactionalId}; returns whether it did. A failure names the task and the id
   * and leaves the task to start without the fence.
   */
  static boolean fence(Fencer fencer, String transactionalId, String task) {
    long started = System.nanoTime();
    try {
      fencer.initTransactions(transactionalId);
      LOG.info("Task {} fenced transactional id {} in {} ms: a predecessor's open answer, if any, is aborted"
          + " before this task reads its offsets", task, transactionalId, (System.nanoTime() - started) / 1_000_000);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      LOG.warn("Task {} interrupted while fencing transactional id {}; starting without the fence", task, transactionalId);
      return false;
    } catch (Exception e) {
      LOG.warn("Task {} could not fence transactional id {} ({}: {}); starting without the fence: a predecessor's"
          + " open transaction then ends on its timeout", task, transactionalId, e.getClass().getSimpleName(), e.getMessage());
      return false;
    }
  }

  /** A {@link Fencer} through a Kafka producer with the sink's own client settings. */
  static Fencer kafka(Map<String, String> kafkaProps) {
    return transactionalId -> {
      Map<String, Object> props = new HashMap<>(kafkaProps);
      props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
      props.put(ProducerConfig.CLIENT_ID_CONFIG, "lakebus-fence-" + UUID.randomUUID());
      props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) MAX_BLOCK.toMillis());
      try (Producer<byte[], byte[]> producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
        producer.initTransactions();
      }
    };
  }
}
