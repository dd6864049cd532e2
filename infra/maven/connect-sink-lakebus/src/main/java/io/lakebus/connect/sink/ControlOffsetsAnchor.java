package io.lakebus.connect.sink;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.connect.errors.ConnectException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Gives the sink's commit coordinators a committed position on the control topic before any of
 * them runs.
 *
 * <p>Why: every commit coordinator reads the control topic in one consumer group, {@code
 * connect-<connector>-coord}, from that group's committed offset. That re-read is how a newly
 * elected coordinator adopts what its dead predecessor left in flight: the tasks' {@code
 * DataWritten} answers to a commit that never reached the table, whose source offsets the tasks
 * already committed with them. But the group has no committed offset until a coordinator
 * completes its first commit cycle, and without one the sink's consumer starts at the topic's end
 * ({@code auto.offset.reset=latest}, the sink's client factory). So a coordinator killed inside a
 * young connector's first cycles took its cycle's answers with it: its successor started past
 * them, and the events behind them were committed upstream but never written to the table.
 * Measured on lakebus's cluster profile: 11,975 acknowledged events missing after one such kill,
 * until a re-queue brought copies back (BENCHMARKS.md, "Kills at every phase of the commit cycle").
 *
 * <p>Here the connector, when it starts and before it has tasks, commits the control topic's last
 * stable offset for that group when the group has none. Every coordinator then starts at or before
 * the first answer ever sent to it, and the sink's own rule (a snapshot's stored control offsets)
 * keeps an answer that was already committed from being committed twice. A group with offsets is
 * left alone, and so is a group with members (a coordinator is running: Kafka refuses to move a
 * live group's offsets).
 */
class ControlOffsetsAnchor {

  private static final Logger LOG = LoggerFactory.getLogger(ControlOffsetsAnchor.class);
  private static final long TIMEOUT_MS = 30_000;

  /** What the anchor did, for the log and the tests. */
  enum Outcome {
    /** The group had no committed control offset: the topic's last stable offset was committed. */
    ANCHORED,
    /** The group already has committed control offsets; nothing changed. */
    ALREADY_ANCHORED,
    /** A coordinator is a member of the group right now; its own commits will anchor it. */
    GROUP_IN_USE
  }

  /** The control topic as the coordinators' group sees it: the three reads and the one write. */
  interface ControlGroup extends AutoCloseable {
    /** The group's committed offsets on the control topic, by partition (empty: none). */
    Map<Integer, Long> committedOffsets() throws Exception;

    /** The control topic's last stable offset of every partition. */
    Map<Integer, Long> lastStableOffsets() throws Exception;

    /** Commits these offsets for the group; throws GroupNotEmptyException while it has members. */
    void commit(Map<Integer, Long> offsets) throws Exception;

    @Override
    void close();
  }

  /**
   * Anchors {@code group} on {@code controlTopic}, with the sink's own Kafka client settings (its
   * {@code iceberg.kafka.*} keys over the worker's), so it reaches Kafka as the coordinator would.
   */
  Outcome anchor(Map<String, String> kafkaProps, String group, String controlTopic) {
    try (ControlGroup control = new AdminControlGroup(Admin.create(new HashMap<String, Object>(kafkaProps)), group, controlTopic)) {
      return anchor(control, group, controlTopic);
    }
  }

  /** The decision, on any {@link ControlGroup}; a failure names the group and the topic. */
  static Outcome anchor(ControlGroup control, String group, String controlTopic) {
    String where = "group " + group + " on control topic " + controlTopic;
    try {
      Map<Integer, Long> committed = control.committedOffsets();
      if (!committed.isEmpty()) {
        LOG.info("Control offsets of {} already committed: {}", where, committed);
        return Outcome.ALREADY_ANCHORED;
      }
      Map<Integer, Long> ends = control.lastStableOffsets();
      try {
        control.commit(ends);
      } catch (GroupNotEmptyException e) {
        LOG.info("Control offsets of {} not anchored: a coordinator is in the group ({})", where, e.getMessage());
        return Outcome.GROUP_IN_USE;
      }
      LOG.info("Anchored {} at its last stable offsets {}: a coordinator elected before the first commit "
          + "completes reads every answer sent since", where, ends);
      return Outcome.ANCHORED;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ConnectException("StableIcebergSinkConnector: interrupted while anchoring the control offsets of " + where, e);
    } catch (ConnectException e) {
      throw e;
    } catch (Exception e) {
      Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
      throw new ConnectException("StableIcebergSinkConnector: could not anchor the control offsets of " + where
          + " (" + cause.getClass().getSimpleName() + ": " + cause.getMessage() + "); set "
          + StableIcebergSinkConnector.ANCHOR_CONTROL_OFFSETS_PROP + "=false to start without it", cause);
    }
  }

  /** {@link ControlGroup} through Kafka's admin client. */
  static final class AdminControlGroup implements ControlGroup {
    private final Admin admin;
    private final String group;
    private final String topic;

    AdminControlGroup(Admin admin, String group, String topic) {
      this.admin = admin;
      this.group = group;
      this.topic = topic;
    }

    @Override
    public Map<Integer, Long> committedOffsets() throws Exception {
      Map<TopicPartition, OffsetAndMetadata> all =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
      Map<Integer, Long> offsets = new HashMap<>();
      all.forEach((tp, meta) -> {
        if (tp.topic().equals(topic) && meta != null) {
          offsets.put(tp.partition(), meta.offset());
        }
      });
      return offsets;
    }

    @Override
    public Map<Integer, Long> lastStableOffsets() throws Exception {
      TopicDescription description =
          admin.describeTopics(Set.of(topic)).allTopicNames().get(TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
      Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
      description.partitions().forEach(p -> latest.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest()));
      Map<Integer, Long> offsets = new HashMap<>();
      admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all()
          .get(TIMEOUT_MS, TimeUnit.MILLISECONDS)
          .forEach((tp, info) -> offsets.put(tp.partition(), info.offset()));
      return offsets;
    }

    @Override
    public void commit(Map<Integer, Long> offsets) throws Exception {
      Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
      offsets.forEach((partition, offset) -> commit.put(new TopicPartition(topic, partition), new OffsetAndMetadata(offset)));
      try {
        admin.alterConsumerGroupOffsets(group, commit).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof GroupNotEmptyException) {
          throw (GroupNotEmptyException) e.getCause();
        }
        throw e;
      } catch (TimeoutException e) {
        throw new TimeoutException("no answer in " + TIMEOUT_MS + " ms committing " + commit);
      }
    }

    @Override
    public void close() {
      admin.close();
    }
  }
}
