package sandbox

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Relay accepts connections on listen and joins each to a new connection
// to target, until ctx ends. It is what runs in the relay container
// (`perfgate sandbox-relay`): it forwards to one address and nothing else.
func Relay(ctx context.Context, listen, target string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("relay: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			join(ctx, c, target)
		}()
	}
}

func join(ctx context.Context, in net.Conn, target string) {
	defer in.Close()
	d := net.Dialer{Timeout: 10 * time.Second}
	out, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // pass the half-close on
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}

// RelayImageName is the local image EnsureRelayImage builds.
const RelayImageName = "perfgate-relay"

// EnsureRelayImage builds (once per binary) a FROM-scratch image whose
// entrypoint is `bin sandbox-relay`, and returns its id. bin must be a
// statically linked perfgate (CGO_ENABLED=0): the image has no C library.
func EnsureRelayImage(ctx context.Context, dockerBin, bin string) (string, error) {
	static, err := StaticBinary(bin)
	if err != nil {
		return "", err
	}
	if !static {
		return "", fmt.Errorf("%s is dynamically linked, and the sandbox relay runs in an image without a C library: build a static perfgate (CGO_ENABLED=0 go build -o perfgate-static ./cmd/perfgate) and give it to the agent as --sandbox-relay-bin", bin)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("relay image: %w", err)
	}
	sum := sha256.Sum256(data)
	tag := RelayImageName + ":" + hex.EncodeToString(sum[:])[:16]
	if out, err := docker(ctx, dockerBin, 30*time.Second, "image", "inspect", "--format", "{{.Id}}", tag); err == nil {
		return strings.TrimSpace(string(out)), nil
	}
	dir, err := os.MkdirTemp("", "perfgate-relay-image-")
	if err != nil {
		return "", fmt.Errorf("relay image: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "perfgate"), data, 0o755); err != nil {
		return "", fmt.Errorf("relay image: %w", err)
	}
	dockerfile := "FROM scratch\nCOPY perfgate /perfgate\nUSER 65534:65534\nENTRYPOINT [\"/perfgate\", \"sandbox-relay\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", fmt.Errorf("relay image: %w", err)
	}
	if out, err := docker(ctx, dockerBin, 5*time.Minute, "build", "--quiet", "--label", "perfgate.relay=1", "--tag", tag, dir); err != nil {
		return "", fmt.Errorf("build the relay image: %w: %s", err, trim(out))
	}
	out, err := docker(ctx, dockerBin, 30*time.Second, "image", "inspect", "--format", "{{.Id}}", tag)
	if err != nil {
		return "", fmt.Errorf("relay image: %w: %s", err, trim(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// StaticBinary reports whether the ELF executable at path needs no
// dynamic loader.
func StaticBinary(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("relay binary %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}
