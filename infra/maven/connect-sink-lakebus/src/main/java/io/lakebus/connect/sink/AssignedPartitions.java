package io.lakebus.connect.sink;

import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.TreeSet;
import org.apache.kafka.common.TopicPartition;

/**
 * The partitions a sink task holds now, in the order the sink's election uses.
 *
 * <p>Why it is kept here: the sink elects as commit coordinator the task holding the smallest
 * (topic, partition) of the whole group. The task that coordinates therefore always holds that
 * partition as its own smallest one, so "this close takes my smallest partition" is the local,
 * group-free test for "if I coordinate, I am losing the partition I was elected by".
 */
final class AssignedPartitions {

  /** The sink's own order: topic name, then partition number. */
  static final Comparator<TopicPartition> ELECTION_ORDER =
      Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

  private final TreeSet<TopicPartition> held = new TreeSet<>(ELECTION_ORDER);

  void opened(Collection<TopicPartition> partitions) {
    held.addAll(partitions);
  }

  /**
   * Records a close and says whether it took this task's smallest partition: the one a
   * coordinator on this task was elected by.
   */
  boolean closedTakesFirst(Collection<TopicPartition> partitions) {
    boolean takesFirst = !held.isEmpty() && partitions.contains(held.first());
    held.removeAll(partitions);
    return takesFirst;
  }

  List<TopicPartition> held() {
    return List.copyOf(held);
  }

  void clear() {
    held.clear();
  }
}
