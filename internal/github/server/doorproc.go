package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// The server's side of the door (door.go): it starts the door process
// with the public port, keeps the port open itself so a door that dies is
// replaced without refusing a connection (the kernel queues them
// meanwhile), and stops the door before it stops serving.

// JournalDir is where the door appends the deliveries it answered and the
// inbox folds them from: "acks" in the data directory.
func JournalDir(cfg Config) string { return filepath.Join(cfg.DataDir, "acks") }

// doorStartTimeout bounds a door's start, from its launch to its ready
// line.
const doorStartTimeout = 30 * time.Second

// doorStopTimeout is how long a stopping door gets to finish its
// requests in flight (its own shutdown waits 30 s) before it is killed.
const doorStopTimeout = 40 * time.Second

// doorProcess supervises the door.
type doorProcess struct {
	newCmd   func() *exec.Cmd
	settings []byte
	port     *os.File // the public listener, the door's fd 3
	answered func(event string, status int)
	log      zerolog.Logger
	done     chan struct{}
}

// runningDoor is one door process.
type runningDoor struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
}

// startDoor starts the door over port with settings and supervises it
// until ctx ends, then stops it and closes port; Wait returns once it
// has. It returns an error when the first door does not start (the
// caller answers webhooks itself then, and still owns port).
func startDoor(ctx context.Context, newCmd func() *exec.Cmd, port *os.File, ds doorSettings, answered func(string, int), log zerolog.Logger) (*doorProcess, error) {
	raw, err := json.Marshal(ds)
	if err != nil {
		return nil, fmt.Errorf("door settings: %w", err)
	}
	d := &doorProcess{newCmd: newCmd, settings: raw, port: port, answered: answered, log: log, done: make(chan struct{})}
	first, err := d.start()
	if err != nil {
		return nil, err
	}
	go d.supervise(ctx, first)
	return d, nil
}

// Wait returns once the door has stopped (after the context given to
// startDoor ended).
func (d *doorProcess) Wait() { <-d.done }

// start launches one door and waits for its ready line.
func (d *doorProcess) start() (*runningDoor, error) {
	cmd := d.newCmd()
	answers, answersW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("door: %w", err)
	}
	cmd.ExtraFiles = []*os.File{d.port, answersW} // fds 3 and 4
	cmd.Stdin = bytes.NewReader(d.settings)
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr // its log lines beside the server's
	}
	parentDeathSignal(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		answers.Close()
		answersW.Close()
		return nil, fmt.Errorf("door: %w", err)
	}
	if err := cmd.Start(); err != nil {
		answers.Close()
		answersW.Close()
		return nil, fmt.Errorf("start the door process: %w", err)
	}
	answersW.Close()
	go func() {
		defer answers.Close()
		doorAnswers(answers, d.answered)
	}()
	r := &runningDoor{cmd: cmd, exited: make(chan struct{}), started: time.Now()}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == doorReady {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(r.exited)
	}()
	select {
	case <-ready:
		d.log.Info().Int("pid", cmd.Process.Pid).Msg("door process started: it answers the webhooks")
		return r, nil
	case <-r.exited:
		return nil, fmt.Errorf("the door process exited before it was ready (%v): its log lines are above", cmd.ProcessState)
	case <-time.After(doorStartTimeout):
		_ = cmd.Process.Kill()
		<-r.exited
		return nil, fmt.Errorf("the door process was not ready in %s", doorStartTimeout)
	}
}

// supervise replaces a door that exits, with backoff (1 s doubling to
// 30 s; back to 1 s after a door that ran a minute), until ctx ends; then
// it stops the current door.
func (d *doorProcess) supervise(ctx context.Context, cur *runningDoor) {
	defer close(d.done)
	defer d.port.Close()
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			d.stop(cur)
			return
		case <-cur.exited:
		}
		if time.Since(cur.started) > time.Minute {
			wait = time.Second
		}
		d.log.Error().Str("exit", cur.cmd.ProcessState.String()).Dur("restart_in", wait).
			Msg("the door process exited: starting another; webhooks wait in the kernel's queue meanwhile")
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
			next, err := d.start()
			if err == nil {
				cur = next
				break
			}
			d.log.Error().Err(err).Dur("restart_in", wait).Msg("door process")
		}
	}
}

// stop asks the door to finish (SIGTERM: it stops taking connections and
// completes those in flight), and kills it after doorStopTimeout.
func (d *doorProcess) stop(r *runningDoor) {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(doorStopTimeout):
		d.log.Warn().Msg("the door process did not stop in time: killed")
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// doorLine parses one of the door's answer lines, "<status> <event>".
func doorLine(line string) (event string, status int, ok bool) {
	code, event, _ := strings.Cut(line, " ")
	status, err := strconv.Atoi(code)
	return event, status, err == nil
}

// errNoPortFile: the listener cannot be handed to a process.
var errNoPortFile = errors.New("the listener cannot be handed to another process (not a TCP or Unix listener)")

// portFile is a descriptor of ln for the door.
func portFile(ln any) (*os.File, error) {
	f, ok := ln.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, errNoPortFile
	}
	return f.File()
}
