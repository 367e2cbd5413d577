package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 15 * time.Second

// Proc is one real process of the system under test: a program, its arguments and
// environment, and a log file that collects its stdout and stderr across restarts.
type Proc struct {
	Name    string
	Path    string
	Args    []string
	Env     []string // added to the test's environment
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has been waited for
}

// Start starts the process; it fails if it is already running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== %s start %s %s\n", time.Now().Format(time.RFC3339Nano), p.Path, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// Never outlive the test binary (e.g. killed by go test's timeout).
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "=== %s exit: %v\n", time.Now().Format(time.RFC3339Nano), err)
		logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

func (p *Proc) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process is running.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Pid returns the process id of the last start (0 if never started).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits for the process to exit, with SIGKILL after stopGrace.
// It returns an error when the process had to be killed.
func (p *Proc) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s did not exit within %s of SIGTERM; killed it", p.Name, stopGrace)
}

// Exited returns a channel closed when the current run of the process ends (nil if it
// was never started).
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// LogTail returns the last n bytes of the process's log.
func (p *Proc) LogTail(n int64) string { return tail(p.LogPath, n) }

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	if i := bytes.IndexByte(b, '\n'); i >= 0 && int64(len(b)) == n {
		b = b[i+1:]
	}
	return string(b)
}

// run runs a program to completion and returns its stdout; the error quotes stderr.
func run(path string, env []string, args ...string) (string, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}
