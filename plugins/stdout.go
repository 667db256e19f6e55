package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// A plugin's standard output is go-plugin's handshake channel: the first
// line it writes must be the handshake ("1|1|unix|/tmp/plugin…|grpc|…").
// A plugin that prints anything first fails the handshake with go-plugin's
// "Unrecognized remote plugin message", or with no line at all when the
// line is longer than go-plugin's 64 KiB reader takes. After the handshake
// go-plugin drops what the process writes to its standard output (the
// descriptor, and the os.Stdout and os.Stderr it redirects into its stdio
// stream) unless told where to send it.
//
// stdoutRunner stands between the process and go-plugin: go-plugin reads
// the first line only; the runner keeps its first bytes, so that a failed
// handshake can say what the plugin printed instead, and sends every later
// line to the node's log.

// maxFirstBytes bounds the bytes of a plugin's first stdout line quoted in
// a start-up error.
const maxFirstBytes = 128

// maxLogLine bounds one logged line of plugin output; the rest of a longer
// line is counted in the record's cut_bytes.
const maxLogLine = 4096

// Messages of the records of a plugin's output after its handshake.
const (
	msgStdout = "plugin stdout"
	msgStderr = "plugin stderr"
)

// handshakeLine is what a go-plugin handshake line starts with: core and
// app protocol versions.
var handshakeLine = regexp.MustCompile(`^[0-9]+\|[0-9]+\|`)

// errStdoutBeforeServe is the start-up error of a plugin whose first
// output line was not the handshake; first is the start of that line.
func errStdoutBeforeServe(first []byte, cut bool) error {
	what := "first bytes"
	if cut {
		what = fmt.Sprintf("first %d bytes", len(first))
	}
	return fmt.Errorf("the plugin wrote to standard output before serving; go-plugin uses stdout for its handshake (%s: %s)",
		what, strconv.Quote(string(first)))
}

// stdoutRunner runs the plugin command for go-plugin (as go-plugin's own
// command runner does) with the process's stdout read through a
// stdoutSplitter.
type stdoutRunner struct {
	cmd       *exec.Cmd
	stdout    *stdoutSplitter
	stderr    io.ReadCloser
	socketDir string // go-plugin's directory for the plugin's socket
}

// runnerFunc returns go-plugin's RunnerFunc for cmd: go-plugin hands it a
// command of its own carrying the environment (handshake cookie, protocol
// versions, TLS certificate) and stdin the plugin needs; they are copied
// onto cmd, and a directory for the plugin's socket. Lines after the
// handshake go to out. The runner is stored in *r.
func runnerFunc(cmd *exec.Cmd, out *lineLog, r **stdoutRunner) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, socketDir string) (runner.Runner, error) {
		cmd.Env, cmd.Stdin = spec.Env, spec.Stdin
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		*r = &stdoutRunner{cmd: cmd, stdout: &stdoutSplitter{r: stdout, out: out}, stderr: stderr, socketDir: socketDir}
		return *r, nil
	}
}

// Start starts the process. When it cannot, it removes the socket
// directory: go-plugin removes it when it kills a process, and there is
// none.
func (r *stdoutRunner) Start(context.Context) error {
	err := r.cmd.Start()
	if err != nil && r.socketDir != "" {
		_ = os.RemoveAll(r.socketDir)
	}
	return err
}

func (r *stdoutRunner) Wait(context.Context) error { return r.cmd.Wait() }

func (r *stdoutRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func (r *stdoutRunner) Stdout() io.ReadCloser           { return r.stdout }
func (r *stdoutRunner) Stderr() io.ReadCloser           { return r.stderr }
func (r *stdoutRunner) Name() string                    { return r.cmd.Path }
func (r *stdoutRunner) Diagnose(context.Context) string { return "" }

func (r *stdoutRunner) ID() string {
	if r.cmd.Process == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}

func (r *stdoutRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *stdoutRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// stdoutSplitter is the process's stdout as go-plugin reads it: the first
// line, then, after a handshake line, nothing more until the process ends
// (end of file) while the bytes after it go to out; after a first line that
// is not a handshake the rest is discarded (the process is being killed).
// Read is called by go-plugin's one reading goroutine; first by others.
type stdoutSplitter struct {
	r   io.ReadCloser
	out *lineLog

	mu        sync.Mutex
	head      []byte // the first line's first bytes (maxFirstBytes at most)
	headCut   bool   // the first line is longer than head
	firstDone bool   // the first line ended
	handshake bool   // and it is a handshake
}

func (s *stdoutSplitter) Read(p []byte) (int, error) {
	s.mu.Lock()
	done, handshake := s.firstDone, s.handshake
	s.mu.Unlock()
	if done {
		w := io.Discard
		if handshake {
			w = s.out
		}
		_, err := io.Copy(w, s.r)
		s.out.flush()
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	n, err := s.r.Read(p)
	line := p[:n]
	end := bytes.IndexByte(line, '\n')
	if end >= 0 {
		line = p[:end+1]
	}
	s.mu.Lock()
	room := maxFirstBytes - len(s.head)
	s.head = append(s.head, line[:min(room, len(line))]...)
	s.headCut = s.headCut || len(line) > room
	if end >= 0 {
		s.firstDone = true
		s.handshake = handshakeLine.Match(s.head)
	}
	handshake = s.handshake
	s.mu.Unlock()
	if end >= 0 && handshake {
		_, _ = s.out.Write(p[end+1 : n])
	}
	return len(line), err
}

func (s *stdoutSplitter) Close() error { return s.r.Close() }

// first returns the start of the first line and whether it was not a
// handshake line (nothing written yet: ok false).
func (s *stdoutSplitter) first() (head []byte, cut, notHandshake bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.head) == 0 {
		return nil, false, false
	}
	return bytes.Clone(s.head), s.headCut, !handshakeLine.Match(s.head)
}

// lineLog is an io.Writer that logs each line written to it as one record
// msg with the line as attribute line (without its newline), on log (which
// carries the stage and plugin). A line longer than maxLogLine is logged cut
// there, with the bytes dropped as cut_bytes. Safe for concurrent use.
type lineLog struct {
	log *slog.Logger
	msg string

	mu  sync.Mutex
	buf []byte
	cut int
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		keep := min(len(chunk), maxLogLine-len(l.buf))
		l.buf = append(l.buf, chunk[:keep]...)
		l.cut += len(chunk) - keep
		if i < 0 {
			break
		}
		l.emit()
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a last line without its newline.
func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 || l.cut > 0 {
		l.emit()
	}
}

func (l *lineLog) emit() {
	args := []any{"line", string(l.buf)}
	if l.cut > 0 {
		args = append(args, "cut_bytes", l.cut)
	}
	l.log.Info(l.msg, args...)
	l.buf, l.cut = l.buf[:0], 0
}
