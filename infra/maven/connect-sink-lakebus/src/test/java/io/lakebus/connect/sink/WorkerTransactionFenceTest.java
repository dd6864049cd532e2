package io.lakebus.connect.sink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.errors.TimeoutException;
import org.junit.jupiter.api.Test;

class WorkerTransactionFenceTest {

  @Test
  void theWorkerTransactionalIdIsTheSinkChannelsOwn() {
    // the sink's channel: prefix + "worker" + suffix, the suffix stamped by StableIcebergSinkConnector
    assertEquals("worker-txn-54a0de8e-0", WorkerTransactionFence.workerTransactionalId("", "-txn-54a0de8e-0"));
    assertEquals("worker-txn-54a0de8e-0", WorkerTransactionFence.workerTransactionalId(null, "-txn-54a0de8e-0"));
    assertEquals("team-worker-txn-1", WorkerTransactionFence.workerTransactionalId("team-", "-txn-1"));
  }

  @Test
  void aFenceInitialisesTransactionsOnThatId() {
    List<String> fenced = new ArrayList<>();
    assertTrue(WorkerTransactionFence.fence(fenced::add, "worker-txn-abc-1", "sink-1"));
    assertEquals(List.of("worker-txn-abc-1"), fenced);
  }

  @Test
  void aFailedFenceIsReportedAndTheTaskStartsWithoutIt() {
    assertFalse(WorkerTransactionFence.fence(id -> {
      throw new TimeoutException("Timeout expired after 20000ms while awaiting InitProducerId");
    }, "worker-txn-abc-0", "sink-0"));
  }

  @Test
  void anInterruptedFenceKeepsTheInterrupt() {
    assertFalse(WorkerTransactionFence.fence(id -> {
      throw new InterruptedException();
    }, "worker-txn-abc-0", "sink-0"));
    assertTrue(Thread.interrupted());  // and clears it for the next test
  }
}
