// Command bench is `make bench`: one run on this machine that prints the figures a user
// would compare and writes them to bench/results.json.
//
// It starts the real stack in-process (embedded etcd, a scheduler replica, the gateway,
// an OCI registry holding the test image, a private containerd and one agent) and
// measures, through the AWS SDK for Go v2 against the gateway:
//
//   - RunTask → RUNNING p50/p99 with a cached image, beside raw containerd create+start of
//     the same image, and the ratio;
//   - the agent's resident memory as a process of its own (berth-agent and the all-in-one
//     `berth agent`), idle and with 50 tasks RUNNING;
//   - gateway DescribeTasks(100) and RunTask(1) p50/p99 at a fixed request rate (tasks
//     placed on scripted fake agents), and DescribeTasks(100) again at a fixed 200
//     requests/s (-high-rate) from an SDK client in a child process, after 2 s of
//     warm-up at that rate, with the server process's and the client's CPU per call;
//   - agent sessions one scheduler replica holds, and the CPU it spends holding them
//     (fake agents in a child process over h2c, heartbeating at the agent's default
//     interval);
//   - placements per second through the production path: RunTask (count 10) over
//     Connect to the scheduler (as the gateway calls it) into control's placement and
//     group commit, 64 concurrent callers, 1,000 fake agents holding sessions, with the
//     scheduler's etcd txns, conflicts and gets per placement, beside etcd's batched-txn
//     ceiling measured in the same run; then again with the fake agents also reporting
//     each task RUNNING, as real agents do (part placement-path-reporting); -profile-dir
//     writes each window's CPU profile, and for these parts and the 200 requests/s one
//     allocation profiles at the window's start and end.
//
// Then it runs the benchmarks the services already have, through `go test -bench`, and
// reads their reported metrics: placements per second with 1,000 instances
// (placement.BenchmarkPlace: PlaceGroup in the shape control's RunTask queue uses it,
// 2 groups at once; BenchmarkPlaceEightInFlight: 8 at once, as the ceiling's txns)
// beside etcd's own batched-transaction ceiling with 8 txns in flight and with one
// (placement.BenchmarkEtcdTxnCeiling, BenchmarkEtcdTxnCeilingSerial: as if a cluster's
// commits took turns), in five rounds each between two ceilings, medians reported;
// DescribeTasks(100) / ListTasks latency at 10
// and 10,000 tasks (control.BenchmarkDescribeTasks100, BenchmarkListTasksPage), and
// service reconcile passes over 1,000 services × 10 tasks (service.BenchmarkPass).
//
//	go run ./tests/e2e/bench -out bench/results.json
//	go run ./tests/e2e/bench -only placement-path,gateway-high -out /tmp/rows.json  # some parts alone
package main
