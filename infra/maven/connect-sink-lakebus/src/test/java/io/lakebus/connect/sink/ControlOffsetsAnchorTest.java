package io.lakebus.connect.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lakebus.connect.sink.ControlOffsetsAnchor.ControlGroup;
import io.lakebus.connect.sink.ControlOffsetsAnchor.Outcome;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.connect.errors.ConnectException;
import org.junit.jupiter.api.Test;

class ControlOffsetsAnchorTest {

  /** A control group in memory: what it has committed, the topic's ends, and what a commit does. */
  private static final class Group implements ControlGroup {
    Map<Integer, Long> committed = Map.of();
    Map<Integer, Long> ends = Map.of(0, 42L);
    Map<Integer, Long> commits;
    Exception onCommit;
    Exception onRead;
    boolean closed;

    @Override
    public Map<Integer, Long> committedOffsets() throws Exception {
      if (onRead != null) {
        throw onRead;
      }
      return committed;
    }

    @Override
    public Map<Integer, Long> lastStableOffsets() {
      return ends;
    }

    @Override
    public void commit(Map<Integer, Long> offsets) throws Exception {
      if (onCommit != null) {
        throw onCommit;
      }
      commits = offsets;
    }

    @Override
    public void close() {
      closed = true;
    }
  }

  @Test
  void aGroupWithoutOffsetsIsCommittedAtTheControlTopicsLastStableOffsets() {
    Group group = new Group();
    assertEquals(Outcome.ANCHORED, ControlOffsetsAnchor.anchor(group, "connect-sink-coord", "control"));
    assertEquals(Map.of(0, 42L), group.commits);
  }

  @Test
  void aGroupWithOffsetsIsLeftAlone() {
    Group group = new Group();
    group.committed = Map.of(0, 7L);
    assertEquals(Outcome.ALREADY_ANCHORED, ControlOffsetsAnchor.anchor(group, "connect-sink-coord", "control"));
    assertNull(group.commits);
  }

  @Test
  void aGroupWithARunningCoordinatorIsLeftAlone() {
    Group group = new Group();
    group.onCommit = new GroupNotEmptyException("The group is not empty.");
    assertEquals(Outcome.GROUP_IN_USE, ControlOffsetsAnchor.anchor(group, "connect-sink-coord", "control"));
  }

  @Test
  void aFailureStopsTheConnectorNamingTheGroupTheTopicAndTheSwitch() {
    Group group = new Group();
    group.onRead = new ExecutionException(new UnknownTopicOrPartitionException("This server does not host this topic-partition."));
    ConnectException error = assertThrows(ConnectException.class,
        () -> ControlOffsetsAnchor.anchor(group, "connect-sink-coord", "control"));
    String message = error.getMessage();
    assertTrue(message.contains("group connect-sink-coord on control topic control"), message);
    assertTrue(message.contains("UnknownTopicOrPartitionException"), message);
    assertTrue(message.contains(StableIcebergSinkConnector.ANCHOR_CONTROL_OFFSETS_PROP + "=false"), message);
  }

  @Test
  void aFailedCommitIsAFailureToo() {
    Group group = new Group();
    group.onCommit = new ExecutionException(new IllegalStateException("broker gone"));
    ConnectException error = assertThrows(ConnectException.class,
        () -> ControlOffsetsAnchor.anchor(group, "connect-sink-coord", "control"));
    assertTrue(error.getMessage().contains("broker gone"), error.getMessage());
  }
}
