package gpu

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestPreflight(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *Fake)
		want  Expect
		errs  []string // substrings the error must hold; none = pass
	}{
		{name: "healthy idle card", setup: func(f *Fake) { f.SetTemp(35) },
			want: Expect{UUID: "GPU-a", PowerLimitW: 700, ECCMode: "enabled", MIGMode: "disabled", Persistence: "enabled"}},
		{name: "wrong card", want: Expect{UUID: "GPU-b"},
			errs: []string{"GPU is GPU-a, the job is pinned to GPU-b"}},
		{name: "foreign processes", setup: func(f *Fake) { f.AddProcess(9); f.AddProcess(3) },
			want: Expect{Allow: AllowPIDs(9)}, errs: []string{"other processes are on the GPU (pids 3)"}},
		{name: "warm card", setup: func(f *Fake) { f.SetTemp(70) },
			errs: []string{"idle temperature 70 C is within 20 C of the slowdown threshold 87 C"}},
		{name: "warm card without a threshold", setup: func(f *Fake) {
			f.SetTemp(75)
			f.SetInfo(func(i *Info) { i.SlowdownTempC = 0 })
		}, errs: []string{"idle temperature 75 C is above 70 C"}},
		{name: "everything wrong at once lists everything", setup: func(f *Fake) {
			f.SetTemp(80)
			f.AddProcess(5)
			f.SetPowerLimit(350)
			f.SetInfo(func(i *Info) { i.MIGMode = "enabled" })
		}, want: Expect{UUID: "GPU-z", PowerLimitW: 700, MIGMode: "disabled"},
			errs: []string{"pinned to GPU-z", "power limit is 350 W, want 700 W", `MIG mode is "enabled", want "disabled"`, "pids 5", "idle temperature 80 C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake("GPU-a")
			if tt.setup != nil {
				tt.setup(f)
			}
			info, err := Preflight(context.Background(), f, tt.want)
			if info.UUID != "GPU-a" {
				t.Fatalf("info %+v", info)
			}
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error with %q", tt.errs)
			}
			for _, e := range tt.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q lacks %q", err, e)
				}
			}
		})
	}
}

func TestAllowDescendants(t *testing.T) {
	self, parent := uint32(os.Getpid()), uint32(os.Getppid())
	if !AllowDescendants(int(parent))(self) {
		t.Error("a child of root is not allowed")
	}
	if !AllowDescendants(int(self))(self) {
		t.Error("root itself is not allowed")
	}
	if AllowDescendants(int(self))(parent) {
		t.Error("root's parent is allowed")
	}
	if AllowDescendants(0)(self) {
		t.Error("root 0 allows a process")
	}
	if !AnyOf(AllowPIDs(1), AllowDescendants(int(self)))(self) || AnyOf()(self) {
		t.Error("AnyOf")
	}
}
