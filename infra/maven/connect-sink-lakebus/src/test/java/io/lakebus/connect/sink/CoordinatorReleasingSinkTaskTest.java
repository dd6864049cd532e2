package io.lakebus.connect.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.connect.IcebergSinkTask;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.junit.jupiter.api.Test;

class CoordinatorReleasingSinkTaskTest {

  private static TopicPartition p(String topic, int partition) {
    return new TopicPartition(topic, partition);
  }

  /** A sink task that records the calls it receives, in order. */
  static final class RecordingSinkTask extends SinkTask {
    final List<String> calls = new ArrayList<>();

    @Override
    public String version() {
      return "test";
    }

    @Override
    public void start(Map<String, String> props) {
      calls.add("start " + props.get("task.id"));
    }

    @Override
    public void open(Collection<TopicPartition> partitions) {
      calls.add("open " + partitions);
    }

    @Override
    public void close(Collection<TopicPartition> partitions) {
      calls.add("close " + partitions);
    }

    @Override
    public void put(Collection<SinkRecord> records) {
      calls.add("put " + records.size());
    }

    @Override
    public void stop() {
      calls.add("stop");
    }
  }

  private final RecordingSinkTask sink = new RecordingSinkTask();
  private final CoordinatorReleasingSinkTask task =
      new CoordinatorReleasingSinkTask(() -> sink, props -> sink.calls.add("fence " + props.get("task.id")));

  @Test
  void startFencesTheWorkerTransactionBeforeTheSinkStarts() {
    task.start(Map.of("task.id", "1"));
    assertEquals(List.of("fence 1", "start 1"), sink.calls);
  }

  @Test
  void startWithTheFenceSwitchedOffOnlyStartsTheSink() {
    task.start(Map.of("task.id", "1", StableIcebergSinkConnector.FENCE_WORKER_TRANSACTION_PROP, "false"));
    assertEquals(List.of("start 1"), sink.calls);
  }

  private void started(TopicPartition... partitions) {
    task.start(Map.of("task.id", "1"));
    task.open(List.of(partitions));
    sink.calls.clear();
  }

  @Test
  void closingTheFirstPartitionRestartsTheSinkAndReopensWhatItKeeps() {
    // the interim leader of a failover: it holds partition 0 and gives it up to task 0
    started(p("events", 0), p("events", 1), p("events", 2));
    task.close(List.of(p("events", 0), p("events", 2)));
    assertEquals(
        List.of("close [events-0, events-2]", "stop", "start 1", "open [events-1]"), sink.calls);
  }

  @Test
  void closingEveryPartitionStopsTheSinkUntilTheNextOpen() {
    // the sink's consumer rebalances eagerly: every rebalance closes all partitions, then opens
    started(p("events", 0), p("events", 1));
    task.close(List.of(p("events", 1), p("events", 0)));
    assertEquals(List.of("close [events-1, events-0]", "stop"), sink.calls);
    task.put(List.of());  // Connect polls between the close and the open
    assertTrue(task.preCommit(Map.of()).isEmpty());
    task.open(List.of(p("events", 0)));
    assertEquals(List.of("close [events-1, events-0]", "stop", "start 1", "open [events-0]"), sink.calls);
    // running again: the next close of its first partition releases again
    task.close(List.of(p("events", 0)));
    assertEquals("stop", sink.calls.get(sink.calls.size() - 1));
  }

  @Test
  void aTaskBeingStoppedIsNotStartedAgain() {
    // Connect stops a task by closing every partition, then stop(): one stop, no catalog reload
    started(p("events", 0), p("events", 1));
    task.close(List.of(p("events", 0), p("events", 1)));
    task.stop();
    assertEquals(List.of("close [events-0, events-1]", "stop"), sink.calls);
  }

  @Test
  void recordsWhileStoppedStartTheSinkRatherThanBeDropped() {
    started(p("events", 0));
    task.close(List.of(p("events", 0)));
    sink.calls.clear();
    task.put(List.of(new SinkRecord("events", 0, null, null, null, "v", 7)));
    assertEquals(List.of("start 1", "put 1"), sink.calls);
  }

  @Test
  void closingOtherPartitionsLeavesTheSinkRunning() {
    started(p("events", 0), p("events", 1), p("events", 2));
    task.close(List.of(p("events", 2)));
    assertEquals(List.of("close [events-2]"), sink.calls);
  }

  @Test
  void theFirstPartitionIsTheSmallestTopicThenPartition() {
    // the sink's own election order: topic name first
    started(p("b-events", 0), p("a-events", 3));
    task.close(List.of(p("b-events", 0)));
    assertEquals(List.of("close [b-events-0]"), sink.calls);
    task.close(List.of(p("a-events", 3)));
    assertEquals("stop", sink.calls.get(2));
  }

  @Test
  void theHeldPartitionsFollowOpensAndCloses() {
    started(p("events", 0));
    task.open(List.of(p("events", 1)));
    task.close(List.of(p("events", 0)));
    // re-opened for what it keeps, and the next close of that one is again a first partition
    assertEquals("open [events-1]", sink.calls.get(sink.calls.size() - 1));
    sink.calls.clear();
    task.close(List.of(p("events", 1)));
    assertEquals(List.of("close [events-1]", "stop"), sink.calls);
  }

  @Test
  void aStoppedTaskForgetsItsPartitions() {
    started(p("events", 0));
    task.stop();
    task.start(Map.of("task.id", "1"));
    sink.calls.clear();
    task.close(List.of(p("events", 0)));
    assertEquals(List.of("close [events-0]"), sink.calls);
  }

  @Test
  void recordsAndTheRestGoToTheSink() {
    started(p("events", 1));
    task.put(List.of());
    assertEquals(List.of("put 0"), sink.calls);
    assertEquals("test", task.version());
  }

  @Test
  void theConnectorRunsThisTaskAroundTheIcebergSinksTask() {
    assertEquals(CoordinatorReleasingSinkTask.class, new StableIcebergSinkConnector().taskClass());
    assertTrue(new CoordinatorReleasingSinkTask().version().length() > 0);
    assertEquals(SinkTask.class, IcebergSinkTask.class.getSuperclass());
  }

  @Test
  void anEmptyCloseIsNoRelease() {
    started(p("events", 0));
    task.close(List.of());
    assertEquals(List.of("close []"), sink.calls);
  }
}
