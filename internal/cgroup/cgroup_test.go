package cgroup

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"sbx_01", true},
		{"0123456789abcdefghijklmnopqrstuvwxyz_", true},
		{"a\x00", false},
		{"", false},
		{"A", false},
		{"a-b", false},
		{"a/b", false},
		{"..", false},
		{"a b", false},
		{"é", false},
		{"mcpbox-self", false},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			err := validateID(tt.id)
			if (err == nil) != tt.ok {
				t.Fatalf("validateID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
			}
			if err != nil && !errors.Is(err, errBadID) {
				t.Errorf("error %v does not wrap errBadID", err)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"zero", Limits{}, true},
		{"all set", Limits{Memory: 1 << 20, Pids: 10, CPU: 2}, true},
		{"min cpu", Limits{CPU: 0.01}, true},
		{"cpu below min", Limits{CPU: 0.009}, false},
		{"negative memory", Limits{Memory: -1}, false},
		{"negative pids", Limits{Pids: -1}, false},
		{"workload pids", Limits{Pids: 10, WorkloadPids: 2}, true},
		{"workload pids above pids", Limits{Pids: 2, WorkloadPids: 3}, false},
		{"workload pids without pids", Limits{WorkloadPids: 1}, false},
		{"negative workload pids", Limits{Pids: 2, WorkloadPids: -1}, false},
		{"negative cpu", Limits{CPU: -0.5}, false},
		{"nan cpu", Limits{CPU: math.NaN()}, false},
		{"inf cpu", Limits{CPU: math.Inf(1)}, false},
		{"huge cpu", Limits{CPU: 1e7}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.l.validate(); (err == nil) != tt.ok {
				t.Fatalf("validate(%+v) = %v, want ok=%v", tt.l, err, tt.ok)
			}
		})
	}
}

func TestCPUQuota(t *testing.T) {
	tests := []struct {
		cpu  float64
		want int64
	}{
		{0, 0},
		{1, 100000},
		{0.5, 50000},
		{1.5, 150000},
		{0.01, 1000},
		{0.333333, 33333},
		{0.3, 30000}, // 0.3*100000 is 29999.999...; rounding, not truncation
	}
	for _, tt := range tests {
		if got := (Limits{CPU: tt.cpu}).cpuQuota(); got != tt.want {
			t.Errorf("cpuQuota(%v) = %d, want %d", tt.cpu, got, tt.want)
		}
	}
}

func TestReportController(t *testing.T) {
	r := Report{Controllers: []ControllerReport{{Name: "memory", Usable: true}, {Name: "pids"}}}
	if c, ok := r.Controller("memory"); !ok || !c.Usable {
		t.Errorf("Controller(memory) = %+v, %v", c, ok)
	}
	if _, ok := r.Controller("cpu"); ok {
		t.Error("Controller(cpu) found in a report without it")
	}
}
