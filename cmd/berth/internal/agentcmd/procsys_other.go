//go:build !linux

package agentcmd

import "errors"

// remountProcSysWritable is Linux only.
func remountProcSysWritable() error {
	return errors.New("--writable-proc-sys: Linux only")
}
