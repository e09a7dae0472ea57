package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/metrics"
	"github.com/perfgate/perfgate/internal/store/journal"
)

// The door is the process that owns the public port. It answers a
// webhook delivery itself — the receiver's checks, the signature, one
// append to the ack journal in the data directory — and passes every other
// request to the server process over a Unix socket. It holds the webhook
// secret and nothing else: no database, no app key, no GitHub token.
//
// Why a process of its own: on a host at load 20, the answer waited for
// CPU behind the server's own work (the inbox, the judge, GitHub calls)
// in one Go runtime, and for SQLite's write lock held by a thread off the
// CPU. A process that mostly sleeps is woken at once by the kernel's
// scheduler, and an append takes no lock another process holds. The
// server's inbox folds the journal into the store (inbox.Journal),
// exactly once, a few milliseconds later.

// doorSettings is what the server hands its door, as JSON on the door's
// standard input (the secret stays out of its arguments and environment).
type doorSettings struct {
	Receiver   app.ReceiverConfig `json:"receiver"`
	JournalDir string             `json:"journal_dir"`
	// Upstream is the server process's Unix socket.
	Upstream string        `json:"upstream"`
	HTTP     HTTPConfig    `json:"http"`
	LongPoll time.Duration `json:"long_poll"`
}

// doorReady is the line the door writes on its standard output once it
// serves.
const doorReady = "perfgate-door ready"

// journalSync is how often the door flushes the journal to the disk when
// it appended since: a crash of the process loses nothing appended (the
// kernel holds it); a crash of the host loses at most this much, as
// SQLite's WAL at synchronous=NORMAL would.
const journalSync = 200 * time.Millisecond

// ErrNoDoorPort: the process was not given a port on fd 3, as a door run
// by hand is not.
var ErrNoDoorPort = errors.New("door: no port on fd 3")

// DoorMain is the door process's start as startDoor launches it: the
// port on fd 3, the answers' pipe to the server on fd 4, the settings on
// stdin, the ready line on out (perfgate door; the tests' door).
func DoorMain(ctx context.Context, out io.Writer, log zerolog.Logger) error {
	ln, err := net.FileListener(os.NewFile(3, "port"))
	if err != nil {
		return fmt.Errorf("%w: %w (perfgate serve starts the door; it is not run by hand)", ErrNoDoorPort, err)
	}
	return ServeDoor(ctx, os.Stdin, ln, os.NewFile(4, "answers"), out, log)
}

// ServeDoor is the door process: it reads its settings from settings,
// serves ln until ctx ends, writes doorReady on ready once it serves,
// and tells the server each delivery's answer on notify, a line
// "<status> <event>" (the server counts it and wakes its inbox). A broken
// notify (the server is gone) ends the door.
func ServeDoor(ctx context.Context, settings io.Reader, ln net.Listener, notify io.Writer, ready io.Writer, log zerolog.Logger) error {
	var ds doorSettings
	if err := json.NewDecoder(settings).Decode(&ds); err != nil {
		return fmt.Errorf("door: read settings: %w", err)
	}
	if len(ds.Receiver.Secret) < app.MinSecretLength || ds.JournalDir == "" || ds.Upstream == "" {
		return errors.New("door: settings lack the webhook secret, the journal directory or the server's socket")
	}
	w, err := journal.Create(ds.JournalDir)
	if err != nil {
		return fmt.Errorf("door: %w", err)
	}
	defer func() {
		if err := w.Close(); err != nil {
			log.Error().Err(err).Msg("door: close the ack journal")
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tell := &teller{w: notify, gone: cancel}
	inbox := journalInbox{w: w}
	webhook := metrics.Answers(newWebhookIntake(app.NewReceiver(ds.Receiver, inbox, nil, log), ds.Receiver.MaxInFlightBytes), tell.answered)
	mux := http.NewServeMux()
	mux.Handle(app.WebhookPath, webhook)
	mux.Handle("/", doorProxy(ds.Upstream, log))
	cfg := Config{HTTP: ds.HTTP, LongPoll: ds.LongPoll}
	hs := httpServer(cfg, mux)
	go func() {
		t := time.NewTicker(journalSync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := w.Sync(); err != nil {
					log.Error().Err(err).Msg("door: sync the ack journal")
				}
			}
		}
	}()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(limitListener(cfg, ln)) }()
	if _, err := fmt.Fprintln(ready, doorReady); err != nil {
		return fmt.Errorf("door: say ready: %w", err)
	}
	log.Info().Str("addr", ln.Addr().String()).Str("journal", ds.JournalDir).Msg("door serving: webhooks answered here, everything else passed to the server")
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("door: %w", err)
		}
	case <-ctx.Done():
	}
	shutdown, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	return hs.Shutdown(shutdown) // the deferred Close syncs the journal
}

// journalInbox is the door's inbox: a verified delivery is appended to
// the journal, stamped with its arrival. It cannot tell a redelivery of a
// delivery already processed (the store can, when it folds the journal),
// so it never answers "duplicate".
type journalInbox struct{ w *journal.Writer }

func (j journalInbox) Accept(ctx context.Context, id, event string, payload []byte) (bool, error) {
	if err := j.w.Append(journal.Record{ID: id, Event: event, Payload: payload, At: arrivedAt(ctx)}); err != nil {
		return false, fmt.Errorf("journal delivery %s: %w", id, err)
	}
	return false, nil
}

// teller writes the answers' lines to the server; a write that fails
// means the server is gone, and the door stops.
type teller struct {
	mu   sync.Mutex
	w    io.Writer
	gone func()
}

func (t *teller) answered(event string, status int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := fmt.Fprintf(t.w, "%d %s\n", status, event); err != nil {
		t.gone()
	}
}

// doorProxy passes a request to the server process on its Unix socket,
// as it came: its Host and the X-Forwarded-* a TLS proxy in front set
// are kept, and the client's address is added to X-Forwarded-For.
func doorProxy(socket string, log zerolog.Logger) http.Handler {
	var d net.Dialer
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "perfgate-server"
			pr.Out.Host = pr.In.Host
			// What a proxy in front said of the client (its scheme
			// decides the session cookie's Secure) goes on as it came,
			// with the client's address added.
			for _, h := range []string{"X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-For"} {
				if v := pr.In.Header.Values(h); len(v) > 0 {
					pr.Out.Header[h] = v
				}
			}
			if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
				pr.Out.Header.Add("X-Forwarded-For", ip)
			}
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     time.Minute,
		},
		// Answers stream as the server writes them (logs, long polls).
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				log.Warn().Err(err).Str("path", r.URL.Path).Msg("door: the server process did not answer")
			}
			http.Error(w, "perfgate's server process did not answer; try again shortly", http.StatusBadGateway)
		},
	}
}

// doorAnswers reads the door's answer lines from r until it closes and
// hands each to answered.
func doorAnswers(r io.Reader, answered func(event string, status int)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if event, status, ok := doorLine(sc.Text()); ok {
			answered(event, status)
		}
	}
}
