package bench

// Benchmarks for the client's own accuracy and cost. They report custom
// metrics; run them one iteration at a time, e.g.
//
//	go test ./internal/runner/bench -run '^$' -bench . -benchtime 1x
//
// (BenchmarkSSEParse wants the default benchtime.)

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/runner/sim"
)

// BenchmarkAccuracy compares each request's client-side TTFT with the TTFT
// the sim recorded for the same X-Request-Id, against the default latency
// model at 256 concurrent streams (and 16, for reference). The sim runs in
// a child process, as a real engine would, so the two schedulers do not
// starve each other. The requests go through requester.do, the same path
// Run uses, so the send instant is known and the gap splits into:
//
//	send_lag_ms: client send → sim handler entry (loopback plus the
//	             engine's own HTTP queueing, which the client cannot see)
//	recv_lag_ms: sim's first-token write → client read (the client's share)
func BenchmarkAccuracy(b *testing.B) {
	for _, tc := range []struct{ conc, prompts int }{{256, 1000}, {16, 160}} {
		b.Run(fmt.Sprintf("conc=%d", tc.conc), func(b *testing.B) {
			for range b.N {
				accuracyRun(b, tc.conc, tc.prompts)
			}
		})
	}
}

func accuracyRun(b *testing.B, conc, prompts int) {
	tracePath := filepath.Join(b.TempDir(), "trace.jsonl")
	url, stop := startHelper(b, "sim", tracePath)
	o := Options{Target: url, NumPrompts: prompts, InputLen: 128, OutputLen: 32, MaxConcurrency: conc, Model: "perfgate-sim"}
	if err := o.normalize(); err != nil {
		b.Fatal(err)
	}
	dsamples, err := loadSamples(context.Background(), &o, rand.New(rand.NewPCG(1, 1)), promptTokens{})
	samples := dsamples.measured
	if err != nil {
		b.Fatal(err)
	}
	q := &requester{client: defaultClient(&o), url: url + EndpointChat, chat: true, model: o.Model,
		ignoreEOS: true, stream: true, idle: time.Minute, maxLine: DefaultMaxLineBytes}
	reqs := make([]request, len(samples))
	for i, s := range samples {
		reqs[i] = request{id: "acc-" + strconv.Itoa(i), prompt: s.prompt, promptLen: s.promptLen, maxTokens: s.maxTokens}
	}
	recs, _ := runPhase(context.Background(), q, reqs, nil, conc, nil)
	stop()
	data, err := os.ReadFile(tracePath)
	if err != nil {
		b.Fatal(err)
	}
	traced := readSimTrace(b, data)
	var abs, rel, send, recv, simTTFTs []float64
	for i := range recs {
		rec := &recs[i]
		if !rec.ok {
			b.Fatalf("request %d failed: %s", i, rec.err)
		}
		tr, ok := traced[reqs[i].id]
		if !ok {
			b.Fatalf("request %d not in the sim trace", i)
		}
		simTTFT := float64(tr.FirstTokenUnixNS-tr.ArrivalUnixNS) / 1e9
		d := math.Abs(rec.ttft - simTTFT)
		abs = append(abs, d*1000)
		rel = append(rel, 100*d/simTTFT)
		simTTFTs = append(simTTFTs, simTTFT*1000)
		send = append(send, float64(tr.ArrivalUnixNS-rec.start.UnixNano())/1e6)
		firstSeen := rec.start.Add(time.Duration(rec.ttft * float64(time.Second)))
		recv = append(recv, float64(firstSeen.UnixNano()-tr.FirstTokenUnixNS)/1e6)
	}
	for _, x := range [][]float64{abs, rel, send, recv, simTTFTs} {
		sort.Float64s(x)
	}
	b.ReportMetric(percentile(abs, 50), "median_abs_ms")
	b.ReportMetric(percentile(abs, 99), "p99_abs_ms")
	b.ReportMetric(percentile(rel, 50), "median_rel_%")
	b.ReportMetric(percentile(send, 50), "send_lag_ms")
	b.ReportMetric(percentile(recv, 50), "recv_lag_ms")
	b.ReportMetric(percentile(simTTFTs, 50), "sim_median_ttft_ms")
}

// BenchmarkCapacity is the most output tokens/s one client parses from a
// zero-latency sim. The sim runs in this process, so the two share the
// CPU and the number is a lower bound on the client alone.
func BenchmarkCapacity(b *testing.B) {
	cfg := sim.DefaultConfig()
	cfg.BaseTTFT, cfg.PrefillPerToken, cfg.DecodeStep, cfg.PerSeqCost, cfg.Jitter = 0, 0, 0, 0, 0
	url, _ := startSim(b, cfg)
	var tokens, secs float64
	for range b.N {
		r, err := Run(context.Background(), Options{Target: url, NumPrompts: 256, InputLen: 16, OutputLen: 1024, MaxConcurrency: 64})
		if err != nil {
			b.Fatal(err)
		}
		if r.Failed > 0 {
			b.Fatalf("%d failed: %v", r.Failed, r.Perfgate.ErrorCounts)
		}
		tokens += float64(r.TotalOutputTokens)
		secs += r.Duration
	}
	b.ReportMetric(tokens/secs, "tok/s")
}

// BenchmarkClientCPU is the client's CPU time per output token, end to
// end: a zero-latency sim in a child process (so its CPU is not counted)
// streams 128- and 1024-token answers at 64 and 256 concurrent requests.
// cpu-µs/token is the client's process CPU time over the measured phase
// (the self-check's own reading) divided by the output tokens; run-µs/token
// is the whole Run, prompt building and calibration included, as a
// separate process would spend it. Also reported: output tokens/s.
//
//	go test ./internal/runner/bench -run '^$' -bench ClientCPU -benchtime 3x
func BenchmarkClientCPU(b *testing.B) {
	for _, tc := range []struct{ conc, out int }{{64, 128}, {256, 128}, {64, 1024}, {256, 1024}} {
		b.Run(fmt.Sprintf("out=%d/conc=%d", tc.out, tc.conc), func(b *testing.B) {
			url, _ := startHelper(b, "sim0", "")
			var tokens, cpu, run, secs float64
			for range b.N {
				from := markCPU()
				r, err := Run(context.Background(), Options{Target: url, Model: "perfgate-sim", NumPrompts: 2 * tc.conc,
					InputLen: 16, OutputLen: tc.out, MaxConcurrency: tc.conc})
				to := markCPU()
				if err != nil {
					b.Fatal(err)
				}
				if r.Failed > 0 {
					b.Fatalf("%d failed: %v", r.Failed, r.Perfgate.ErrorCounts)
				}
				tokens += float64(r.TotalOutputTokens)
				cpu += r.Perfgate.Client.CPUSeconds
				run += (to.cpu - from.cpu).Seconds()
				secs += r.Duration
			}
			b.ReportMetric(cpu/tokens*1e6, "cpu-µs/token")
			b.ReportMetric(run/tokens*1e6, "run-µs/token")
			b.ReportMetric(tokens/secs, "tok/s")
		})
	}
}

// BenchmarkStreamMemory holds 256 streams open against a server in a child
// process (so only the client's memory is counted) and reports the heap
// and goroutine-stack growth per stream.
func BenchmarkStreamMemory(b *testing.B) {
	const streams = 256
	for range b.N {
		base, stop := startHelper(b, "stream", "")
		var before, during runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		done := make(chan error, 1)
		go func() {
			_, err := Run(context.Background(), Options{Target: base, Model: "m", NumPrompts: streams, InputLen: 16, OutputLen: 64,
				MaxConcurrency: streams, Timeout: time.Minute})
			done <- err
		}()
		for deadline := time.Now().Add(30 * time.Second); ; {
			if n := helperCount(b, base); n >= streams {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("streams did not open within 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // let the client read the first tokens
		runtime.GC()
		runtime.ReadMemStats(&during)
		resp, err := http.Post(base+"/release", "text/plain", nil)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		stop()
		b.ReportMetric(float64(int64(during.HeapAlloc)-int64(before.HeapAlloc))/streams/1024, "heap_KiB/stream")
		b.ReportMetric(float64(int64(during.StackInuse)-int64(before.StackInuse))/streams/1024, "stack_KiB/stream")
	}
}

// BenchmarkSSEParse is the client's per-token parse path over a recorded
// sim stream: line split, chunk parse, clock read, ITL append.
func BenchmarkSSEParse(b *testing.B) {
	const tokens = 1024
	stream := recordedStream(b, tokens)
	br := bufio.NewReaderSize(nil, 4096)
	rd := bytes.NewReader(stream)
	rec := record{itl: make([]float64, 0, tokens)}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for range b.N {
		rd.Reset(stream)
		br.Reset(rd)
		rec = record{itl: rec.itl[:0]}
		if done, err := readStream(br, &rec, time.Now(), nil, false, DefaultMaxLineBytes); !done || err != nil || rec.chunks != tokens {
			b.Fatalf("done %v err %v chunks %d (%s)", done, err, rec.chunks, rec.err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N*tokens), "allocs/token")
}

// recordedStream captures a real sim chat stream of n tokens.
func recordedStream(b *testing.B, n int) []byte {
	cfg := sim.DefaultConfig()
	cfg.BaseTTFT, cfg.PrefillPerToken, cfg.DecodeStep, cfg.PerSeqCost = 0, 0, 0, 0
	url, _ := startSim(b, cfg)
	body := fmt.Sprintf(`{"model":"perfgate-sim","messages":[{"role":"user","content":"hi there"}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, n)
	resp, err := http.Post(url+EndpointChat, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("record stream: %v %d", err, resp.StatusCode)
	}
	return data
}

// startHelper re-runs this test binary as a server in its own process
// (kind "stream": TestHelperStreamServer; "sim": TestHelperSim writing its
// trace to tracePath) and returns its URL; stop ends it and waits.
func startHelper(b *testing.B, kind, tracePath string) (string, func()) {
	b.Helper()
	name := map[string]string{"stream": "TestHelperStreamServer", "sim": "TestHelperSim", "sim0": "TestHelperSim"}[kind]
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), "PERFGATE_BENCH_HELPER="+kind, "PERFGATE_BENCH_TRACE="+tracePath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("helper %s: %v", kind, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			stdin.Close()
			_ = cmd.Wait()
		})
	}
	b.Cleanup(stop)
	return strings.TrimSpace(line), stop
}

// TestHelperSim is the child process of BenchmarkAccuracy (the default sim
// engine, tracing to PERFGATE_BENCH_TRACE) and of BenchmarkClientCPU (a
// zero-latency one), serving until its stdin closes.
func TestHelperSim(t *testing.T) {
	kind := os.Getenv("PERFGATE_BENCH_HELPER")
	if kind != "sim" && kind != "sim0" {
		t.Skip("helper process for BenchmarkAccuracy and BenchmarkClientCPU")
	}
	cfg := sim.DefaultConfig()
	if path := os.Getenv("PERFGATE_BENCH_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.Trace = f
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if kind == "sim0" { // zero latency: as fast as the engine loop streams
		cfg = cfg.Quiet()
		cfg.BaseTTFT, cfg.PrefillPerToken, cfg.DecodeStep, cfg.PerSeqCost, cfg.PrefillStepOverhead = 0, 0, 0, 0, 0
	}
	err := sim.Serve(ctx, cfg, "127.0.0.1:0", func(addr string) { fmt.Printf("http://%s\n", addr) })
	if err != nil {
		t.Fatal(err)
	}
}

func helperCount(b *testing.B, base string) int {
	resp, err := http.Get(base + "/inflight")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// TestHelperStreamServer is the child process of BenchmarkStreamMemory: it
// streams four tokens per request, holds every stream but the first
// request's open until /release, then finishes them. It exits when its
// stdin closes.
func TestHelperStreamServer(t *testing.T) {
	if os.Getenv("PERFGATE_BENCH_HELPER") != "stream" {
		t.Skip("helper process for BenchmarkStreamMemory")
	}
	var open atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"data":[{"id":"m"}]}`)
	})
	mux.HandleFunc("GET /inflight", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, open.Load()) })
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) { once.Do(func() { close(release) }) })
	mux.HandleFunc("POST "+EndpointChat, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 4 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
		}
		w.(http.Flusher).Flush()
		if strings.HasSuffix(r.Header.Get("X-Request-Id"), "-probe") {
			// The first request, sent alone before the run, is not held.
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
			return
		}
		open.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
	})
	srv := &http.Server{Handler: mux}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
