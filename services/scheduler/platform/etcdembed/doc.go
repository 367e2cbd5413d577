// Package etcdembed runs a single-member etcd inside the process, for
// `berth dev` and for tests. It owns the server's lifecycle (start, wait until
// ready, stop, restart on the same data directory) and hands out clientv3
// clients; it knows nothing about what Berth stores.
package etcdembed
