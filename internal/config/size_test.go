package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr string // substring; empty: no error
	}{
		{"0", 0, ""},
		{"1024", 1024, ""},
		{"512Mi", 512 << 20, ""},
		{"1Gi", 1 << 30, ""},
		{"256M", 256_000_000, ""},
		{"3k", 3000, ""},
		{"2Ki", 2048, ""},
		{"7Ei", 7 << 60, ""},
		{"9223372036854775807", math.MaxInt64, ""},
		{"8Ei", 0, "too large"},
		{"9223372036854775808", 0, "too large"},
		{"10E", 0, "too large"},
		{"-1", 0, "negative"},
		{"-1Mi", 0, "negative"},
		{"", 0, "want an integer"},
		{"Mi", 0, "want an integer"},
		{"1.5Gi", 0, "unknown unit"},
		{"512m", 0, "unknown unit"},
		{"1K", 0, "unknown unit"},
		{"1 Mi", 0, "unknown unit"},
		{"1MiB", 0, "unknown unit"},
		{"+1", 0, "want an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSize(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1k"},
		{1024, "1Ki"},
		{1536, "1536"},
		{512 << 20, "512Mi"},
		{256_000_000, "256M"},
		{1 << 30, "1Gi"},
		{3 << 60, "3Ei"},
		{math.MaxInt64, "9223372036854775807"},
		{-5, "-5"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Fatalf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
			}
			if tt.in < 0 {
				return
			}
			back, err := ParseSize(tt.in.String())
			if err != nil || back != tt.in {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tt.in.String(), back, err, int64(tt.in))
			}
		})
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		str     string
		wantErr string
	}{
		{"0s", 0, "0s", ""},
		{"0", 0, "0s", ""},
		{"60s", time.Minute, "1m", ""},
		{"1h", time.Hour, "1h", ""},
		{"90m", 90 * time.Minute, "1h30m", ""},
		{"1h0m1s", time.Hour + time.Second, "1h0m1s", ""},
		{"1500ms", 1500 * time.Millisecond, "1.5s", ""},
		{"8h", 8 * time.Hour, "8h", ""},
		{"-1s", 0, "", "must not be negative"},
		{"60", 0, "", "invalid duration"},
		{"1d", 0, "", "invalid duration"},
		{"", 0, "", "invalid duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseDuration(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || time.Duration(got) != tt.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tt.in, time.Duration(got), err, tt.want)
			}
			if s := got.String(); s != tt.str {
				t.Fatalf("String() = %q, want %q", s, tt.str)
			}
			if back, err := ParseDuration(got.String()); err != nil || back != got {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", got.String(), back, err, got)
			}
		})
	}
}
