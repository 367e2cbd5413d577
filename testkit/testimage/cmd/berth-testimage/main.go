// Command berth-testimage is the one program in Berth's test image. Its first
// argument picks what it does, so one image covers the cases tests need:
//
//	sleep N            sleep N seconds, then exit 0
//	exit N             exit with status N at once
//	sleep-exit N CODE  sleep N seconds, then exit with status CODE (0 at once on SIGTERM)
//	read-stdin         read stdin to its end, print "stdin ended", exit 0 (0 on SIGTERM)
//	tty                print "stdout is a terminal" or "stdout is not a terminal", then
//	                   sleep until signalled (exit 0)
//	env                print the environment, sorted, one VAR=value a line
//	echo OUT ERR       write OUT to stdout and ERR to stderr, each with a newline
//	serve PORT         serve HTTP on PORT: 200 "ok" on / and /health; GET /resolve/NAME
//	                   answers NAME's IPv4 addresses through the container's resolv.conf,
//	                   sorted and comma-separated (502 with the error when the lookup fails)
//	serve FIRST-LAST   the same on every port of FIRST..LAST (a containerPortRange)
//	ignore-sigterm     keep running when sent SIGTERM
//	alloc N            allocate and touch N MiB, then sleep
//	health-file PATH   exit 0 if PATH exists, else 1 (a CMD health check)
//	check URL          exit 0 if GET URL answers 200, else 1 (a CMD health check)
//	get URL...         GET each URL ($VAR and ${VAR} expanded from the environment) and
//	                   print "URL STATUS BODY" a line; exit 1 when one fails or is not 200
//	write PATH TEXT    write TEXT to the file PATH, exit 0; print the error and exit 1
//	cat PATH           print the file PATH, exit 0; print the error and exit 1
//	tick N MS          print "tick I" (I = 1…N) every MS milliseconds, then exit 0
//	lines N SIZE       print N lines of SIZE bytes ("line I " padded) as fast as it can, exit 0
//	aws-probe          with the AWS SDK's default credential chain (the task role's
//	                   credentials endpoint) call sts get-caller-identity and ecs
//	                   list-clusters, read the task metadata endpoint v4, print the
//	                   results as key=value lines, then sleep until signalled
//
// With no arguments it prints this list of modes (usageText) to stderr and exits 2; the
// demo image's Cmd is "sleep 3600", so a task without a command sleeps. Modes that wait exit 0 on SIGTERM
// or SIGINT (except ignore-sigterm); a usage error exits 2. The program is
// static and needs no shell or libc.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// usageText is what berth-testimage prints without arguments: its modes, as the package
// doc lists them.
const usageText = `usage: berth-testimage MODE [ARGS...]

sleep N            sleep N seconds, then exit 0
exit N             exit with status N at once
sleep-exit N CODE  sleep N seconds, then exit with status CODE (0 at once on SIGTERM)
read-stdin         read stdin to its end, print "stdin ended", exit 0 (0 on SIGTERM)
tty                print "stdout is a terminal" or "stdout is not a terminal", then
                   sleep until signalled (exit 0)
env                print the environment, sorted, one VAR=value a line
echo OUT ERR       write OUT to stdout and ERR to stderr, each with a newline
serve PORT         serve HTTP on PORT: 200 "ok" on / and /health; GET /resolve/NAME
                   answers NAME's IPv4 addresses through the container's resolv.conf,
                   sorted and comma-separated (502 with the error when the lookup fails)
serve FIRST-LAST   the same on every port of FIRST..LAST (a containerPortRange)
ignore-sigterm     keep running when sent SIGTERM
alloc N            allocate and touch N MiB, then sleep
health-file PATH   exit 0 if PATH exists, else 1 (a CMD health check)
check URL          exit 0 if GET URL answers 200, else 1 (a CMD health check)
get URL...         GET each URL ($VAR and ${VAR} expanded from the environment) and
                   print "URL STATUS BODY" a line; exit 1 when one fails or is not 200
write PATH TEXT    write TEXT to the file PATH, exit 0; print the error and exit 1
cat PATH           print the file PATH, exit 0; print the error and exit 1
tick N MS          print "tick I" (I = 1…N) every MS milliseconds, then exit 0
lines N SIZE       print N lines of SIZE bytes ("line I " padded) as fast as it can, exit 0
aws-probe          with the AWS SDK's default credential chain (the task role's
                   credentials endpoint) call sts get-caller-identity and ecs
                   list-clusters, read the task metadata endpoint v4, print the
                   results as key=value lines, then sleep until signalled

Modes that wait exit 0 on SIGTERM or SIGINT (except ignore-sigterm); a usage error exits 2.
`

// run performs the mode named by args[0] and returns the exit status.
func run(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	mode, rest := args[0], args[1:]
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "berth-testimage %s: "+format+"\n", append([]any{mode}, a...)...)
		return exitUsage
	}
	intArg := func() (int, error) {
		if len(rest) != 1 {
			return 0, errors.New("takes one integer argument")
		}
		return strconv.Atoi(rest[0])
	}

	switch mode {
	case "sleep":
		n, err := intArg()
		if err != nil {
			return usage("%v", err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return sleep(ctx, time.Duration(n)*time.Second, stdout)
	case "sleep-exit":
		if len(rest) != 2 {
			return usage("takes two integer arguments")
		}
		n, err1 := strconv.Atoi(rest[0])
		code, err2 := strconv.Atoi(rest[1])
		if err := errors.Join(err1, err2); err != nil {
			return usage("%v", err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		sleep(ctx, time.Duration(n)*time.Second, stdout)
		if ctx.Err() != nil {
			return exitOK
		}
		fmt.Fprintf(stdout, "exiting with status %d\n", code)
		return code
	case "read-stdin":
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(done)
		}()
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		fmt.Fprintln(stdout, "reading stdin")
		select {
		case <-done:
			fmt.Fprintln(stdout, "stdin ended")
		case <-ctx.Done():
			fmt.Fprintln(stdout, "signalled; exiting")
		}
		return exitOK
	case "tty":
		var tio syscall.Termios
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, os.Stdout.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&tio)))
		if errno == 0 {
			fmt.Fprintln(stdout, "stdout is a terminal")
		} else {
			fmt.Fprintln(stdout, "stdout is not a terminal")
		}
		// Keep running: a test reads the line while the process lives, whatever becomes
		// of a terminal's last output when its process exits at once.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		<-ctx.Done()
		return exitOK
	case "exit":
		n, err := intArg()
		if err != nil {
			return usage("%v", err)
		}
		fmt.Fprintf(stdout, "exiting with status %d\n", n)
		return n
	case "env":
		env := slices.Clone(environ)
		slices.Sort(env)
		for _, kv := range env {
			fmt.Fprintln(stdout, kv)
		}
		return exitOK
	case "tick", "lines":
		if len(rest) != 2 {
			return usage("takes N and MS (tick) or N and SIZE (lines)")
		}
		n, err1 := strconv.Atoi(rest[0])
		m, err2 := strconv.Atoi(rest[1])
		if err1 != nil || err2 != nil || n < 0 || m < 0 {
			return usage("takes two non-negative integers")
		}
		if mode == "tick" {
			for i := 1; i <= n; i++ {
				fmt.Fprintf(stdout, "tick %d\n", i)
				time.Sleep(time.Duration(m) * time.Millisecond)
			}
			return exitOK
		}
		w := bufio.NewWriterSize(stdout, 64<<10)
		pad := strings.Repeat("x", m)
		for i := 1; i <= n; i++ {
			line := fmt.Sprintf("line %d %s", i, pad)
			fmt.Fprintln(w, line[:max(m, len(line)-len(pad))])
		}
		w.Flush()
		return exitOK
	case "echo":
		if len(rest) != 2 {
			return usage("takes STDOUT_TEXT STDERR_TEXT")
		}
		fmt.Fprintln(stdout, rest[0])
		fmt.Fprintln(stderr, rest[1])
		return exitOK
	case "serve":
		if len(rest) != 1 {
			return usage("takes a port or a range FIRST-LAST")
		}
		first, last, isRange := strings.Cut(rest[0], "-")
		if !isRange {
			last = first
		}
		lo, err1 := strconv.Atoi(first)
		hi, err2 := strconv.Atoi(last)
		if err1 != nil || err2 != nil || lo > hi {
			return usage("takes a port or a range FIRST-LAST")
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := serve(ctx, lo, hi, stdout); err != nil {
			fmt.Fprintf(stderr, "serve: %v\n", err)
			return exitFail
		}
		return exitOK
	case "ignore-sigterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(stdout, "ignoring SIGTERM")
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT)
		defer stop()
		<-ctx.Done()
		return exitOK
	case "alloc":
		n, err := intArg()
		if err != nil || n < 0 {
			return usage("takes a number of MiB")
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return alloc(ctx, n, stdout)
	case "health-file":
		if len(rest) != 1 {
			return usage("takes PATH")
		}
		if _, err := os.Stat(rest[0]); err != nil {
			fmt.Fprintf(stdout, "unhealthy: %v\n", err)
			return exitFail
		}
		fmt.Fprintln(stdout, "healthy")
		return exitOK
	case "check":
		if len(rest) != 1 {
			return usage("takes URL")
		}
		return check(rest[0], stdout)
	case "get":
		if len(rest) == 0 {
			return usage("takes URL...")
		}
		return get(rest, environ, stdout)
	case "write":
		if len(rest) != 2 {
			return usage("takes PATH TEXT")
		}
		if err := os.WriteFile(rest[0], []byte(rest[1]), 0o644); err != nil {
			fmt.Fprintf(stdout, "write failed: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "wrote %s\n", rest[0])
		return exitOK
	case "aws-probe":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return awsProbe(ctx, stdout)
	case "cat":
		if len(rest) != 1 {
			return usage("takes PATH")
		}
		b, err := os.ReadFile(rest[0])
		if err != nil {
			fmt.Fprintf(stdout, "cat failed: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	default:
		return usage("unknown mode; want sleep, exit, env, tick, lines, echo, serve, ignore-sigterm, alloc, health-file, check, get, write, cat or aws-probe")
	}
}

func sleep(ctx context.Context, d time.Duration, stdout io.Writer) int {
	fmt.Fprintf(stdout, "sleeping %s\n", d)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		fmt.Fprintln(stdout, "signalled; exiting")
	}
	return exitOK
}

func serve(ctx context.Context, first, last int, stdout io.Writer) error {
	ok := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", ok)
	mux.HandleFunc("GET /health", ok)
	mux.HandleFunc("GET /resolve/{name}", func(w http.ResponseWriter, r *http.Request) {
		ips, err := net.DefaultResolver.LookupIP(r.Context(), "ip4", r.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out := make([]string, 0, len(ips))
		for _, ip := range ips {
			out = append(out, ip.String())
		}
		slices.Sort(out)
		io.WriteString(w, strings.Join(out, ","))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var lns []net.Listener
	for port := first; port <= last; port++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return err
		}
		lns = append(lns, ln)
		fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- srv.Serve(ln) }()
	}
	for range lns {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
			return err
		}
	}
	return nil
}

func alloc(ctx context.Context, mib int, stdout io.Writer) int {
	buf := make([]byte, mib<<20)
	for i := 0; i < len(buf); i += os.Getpagesize() {
		buf[i] = 1
	}
	fmt.Fprintf(stdout, "allocated %d MiB\n", mib)
	<-ctx.Done()
	runtime.KeepAlive(buf)
	return exitOK
}

// get GETs each URL ($VAR and ${VAR} expanded from environ) and prints its status and
// body on one line; it returns exitFail when one fails or answers other than 200.
func get(urls, environ []string, stdout io.Writer) int {
	client := &http.Client{Timeout: 5 * time.Second}
	code := exitOK
	for _, u := range urls {
		u = os.Expand(u, func(name string) string {
			for _, kv := range environ {
				if v, ok := strings.CutPrefix(kv, name+"="); ok {
					return v
				}
			}
			return ""
		})
		resp, err := client.Get(u)
		if err != nil {
			fmt.Fprintf(stdout, "%s error %v\n", u, err)
			code = exitFail
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			code = exitFail
		}
		fmt.Fprintf(stdout, "%s %d %s\n", u, resp.StatusCode, strings.Join(strings.Fields(string(b)), " "))
	}
	return code
}

func check(url string, stdout io.Writer) int {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintf(stdout, "unhealthy: %v\n", err)
		return exitFail
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stdout, "unhealthy: %s\n", resp.Status)
		return exitFail
	}
	fmt.Fprintln(stdout, "healthy")
	return exitOK
}
