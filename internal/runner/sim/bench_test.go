package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStreamThroughput measures how many output tokens per second one
// in-process client can parse from a zero-latency engine over loopback HTTP:
// the capacity ceiling of a `perfgate bench` run against the simulator. The
// client decodes every chunk as JSON, as the benchmark client does.
func BenchmarkStreamThroughput(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("streams=%d", conc), func(b *testing.B) {
			e, err := New(zeroConfig())
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(e.Handler())
			defer ts.Close()
			defer e.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
			const maxTokens = 1024
			body := fmt.Sprintf(`{"model":"perfgate-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, maxTokens)

			var tokens int64
			var mu sync.Mutex
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			work := make(chan struct{})
			for range conc {
				wg.Go(func() {
					for range work {
						n, err := streamOnce(client, ts.URL+"/v1/chat/completions", body)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						tokens += int64(n)
						mu.Unlock()
					}
				})
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tokens/s")
		})
	}
}

// streamOnce runs one streaming request and counts content tokens.
func streamOnce(client *http.Client, url, body string) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var chunk struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	n := 0
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return n, nil
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || bytes.HasPrefix(data, []byte("[DONE]")) {
			continue
		}
		chunk.Choices = chunk.Choices[:0]
		if err := json.Unmarshal(data, &chunk); err != nil {
			return n, fmt.Errorf("decode chunk: %w", err)
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			n++
		}
	}
}
