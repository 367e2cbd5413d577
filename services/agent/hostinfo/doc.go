// Package hostinfo describes the host an agent runs on: CPU cores, memory,
// operating system and architecture, and a host id that stays the same across
// agent restarts because it is stored in the agent's data directory.
package hostinfo
