// Command probe runs inside an engine's container in the sandbox tests
// and reports, as JSON, what the container can reach, write and see.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

type report struct {
	UID            int               `json:"uid"`
	Dials          map[string]string `json:"dials"` // "connected", "refused" (something answered) or the error
	WriteRoot      string            `json:"write_root"`
	WriteWorkspace string            `json:"write_workspace"`
	WriteModels    string            `json:"write_models"`
	WriteTmp       string            `json:"write_tmp"`
	Env            []string          `json:"env"`
	TokenFoundIn   []string          `json:"token_found_in"`
	CapEff         string            `json:"cap_eff"`
	NoNewPrivs     string            `json:"no_new_privs"`
	Routes         []string          `json:"routes"` // destination/mask via gateway, of every IPv4 route
	DockerSocket   bool              `json:"docker_socket"`
	Workspace      []string          `json:"workspace"`
	// Limits: the ulimits (soft:hard), the CPU quota (quota/period, of
	// cgroup v2 or v1) and the CPUs the process may run on.
	NoFile      string `json:"nofile"`
	NProc       string `json:"nproc"`
	Core        string `json:"core"`
	CPUQuota    string `json:"cpu_quota"`
	CPUsAllowed string `json:"cpus_allowed"`
}

func main() {
	token := flag.String("token", "", "a secret that must be nowhere in the container")
	dial := flag.String("dial", "", "comma-separated host:port to try")
	gwPorts := flag.String("gateway-ports", "", "comma-separated ports to try on every route's gateway")
	spew := flag.Int("spew", 0, "write this many bytes of output, then linger, and report nothing (the log-cap test)")
	exists := flag.String("exists", "", "exit 0 when this file exists, 1 when not, and report nothing")
	flag.Parse()
	if *exists != "" {
		if _, err := os.Stat(*exists); err != nil {
			os.Exit(1)
		}
		return
	}
	if *spew > 0 {
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for n := 0; n < *spew; n += len(line) {
			os.Stdout.Write(line)
		}
		_ = os.WriteFile("/tmp/spew-done", nil, 0o644)
		time.Sleep(10 * time.Minute)
		return
	}
	r := report{UID: os.Getuid(), Dials: map[string]string{}, Env: os.Environ()}
	targets := strings.Split(*dial, ",")
	if f, err := os.Open("/proc/net/route"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 7 && fields[0] != "Iface" {
				gw := hexIP(fields[2])
				r.Routes = append(r.Routes, hexIP(fields[1])+"/"+hexIP(fields[7])+" via "+gw)
				if gw != "0.0.0.0" {
					for _, p := range strings.Split(*gwPorts, ",") {
						if p != "" {
							targets = append(targets, net.JoinHostPort(gw, p))
						}
					}
				}
			}
		}
		f.Close()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, a := range targets {
		if a == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := "connected"
			c, err := net.DialTimeout("tcp", a, 3*time.Second)
			switch {
			case err == nil:
				c.Close()
			case strings.Contains(err.Error(), "connection refused"):
				got = "refused"
			default:
				got = err.Error()
			}
			mu.Lock()
			r.Dials[a] = got
			mu.Unlock()
		}()
	}
	wg.Wait()
	r.WriteRoot = tryWrite("/probe-write")
	r.WriteWorkspace = tryWrite("/workspace/probe-write")
	r.WriteModels = tryWrite("/models/probe-write")
	r.WriteTmp = tryWrite("/tmp/probe-write")
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "CapEff":
				r.CapEff = strings.TrimSpace(v)
			case "NoNewPrivs":
				r.NoNewPrivs = strings.TrimSpace(v)
			case "Cpus_allowed_list":
				r.CPUsAllowed = strings.TrimSpace(v)
			}
		}
	}
	r.NoFile, r.NProc, r.Core = rlimit(syscall.RLIMIT_NOFILE), rlimit(6 /* RLIMIT_NPROC */), rlimit(syscall.RLIMIT_CORE)
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		r.CPUQuota = strings.Replace(strings.TrimSpace(string(b)), " ", "/", 1)
	} else {
		for _, dir := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"} {
			q, err1 := os.ReadFile(dir + "/cpu.cfs_quota_us")
			p, err2 := os.ReadFile(dir + "/cpu.cfs_period_us")
			if err1 == nil && err2 == nil {
				r.CPUQuota = strings.TrimSpace(string(q)) + "/" + strings.TrimSpace(string(p))
				break
			}
		}
	}
	for _, p := range []string{"/var/run/docker.sock", "/run/docker.sock"} {
		if _, err := os.Stat(p); err == nil {
			r.DockerSocket = true
		}
	}
	_ = filepath.WalkDir("/workspace", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r.Workspace = append(r.Workspace, p)
		}
		return nil
	})
	if *token != "" {
		for _, k := range r.Env {
			if strings.Contains(k, *token) {
				r.TokenFoundIn = append(r.TokenFoundIn, "environment")
			}
		}
		// Every file the container can read, less the kernel's views.
		_ = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (p == "/proc" || p == "/sys" || p == "/dev") {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(*token)) && p != "/probe" {
					r.TokenFoundIn = append(r.TokenFoundIn, p)
				}
			}
			return nil
		})
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func rlimit(res int) string {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(res, &l); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d:%d", l.Cur, l.Max)
}

func tryWrite(p string) string {
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		return err.Error()
	}
	os.Remove(p)
	return ""
}

// hexIP turns /proc/net/route's little-endian hex into dotted decimal.
func hexIP(h string) string {
	var b [4]byte
	for i := 0; i < 4 && len(h) >= 2*(i+1); i++ {
		var v byte
		for _, c := range h[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'A' && c <= 'F':
				v |= byte(c - 'A' + 10)
			case c >= 'a' && c <= 'f':
				v |= byte(c - 'a' + 10)
			}
		}
		b[3-i] = v
	}
	return net.IPv4(b[0], b[1], b[2], b[3]).String()
}
