package kube

import (
	"bufio"
	"context"
	"errors"
	"hash/maphash"
	"io"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// MaxLogLine bounds one line of a followed log; a longer line is skipped.
const MaxLogLine = 64 << 10

// LogSeen is how many lines of each pod the follower remembers to skip
// them when a reconnected stream sends them again.
const LogSeen = 4096

// FollowOptions says whose logs FollowLogs follows and what to do with
// each line.
type FollowOptions struct {
	Namespace string
	Selector  string // the pods' label selector
	Container string
	// Accept, if set, says whether a listed pod is one to follow (e.g.
	// that it has the expected owner).
	Accept func(*corev1.Pod) bool
	// Line is called with each line (without its newline) and the name
	// of the pod that wrote it; calls for one pod are in order, those of
	// different pods concurrent. line is valid only during the call.
	Line func(pod string, line []byte)
	// Relist is how often the pods are listed again; zero: 2 seconds.
	Relist time.Duration
	// Errors, if set, is told of failed requests (they are retried).
	Errors func(pod string, err error)
}

// FollowLogs follows the logs of the pods that match o (GET
// pods/NAME/log?follow=true) until ctx ends: it lists the pods every
// Relist, follows each new one in a goroutine of its own, reconnects a
// stream that ends while its pod is listed (from a second before its
// last line, skipping the lines it already passed on), and stops
// following a pod once it is no longer listed. It returns when ctx ends
// and every stream has stopped.
func (c *Client) FollowLogs(ctx context.Context, o FollowOptions) {
	if o.Relist == 0 {
		o.Relist = 2 * time.Second
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	following := map[string]context.CancelFunc{}
	defer func() {
		for _, cancel := range following {
			cancel()
		}
	}()
	for {
		var l corev1.PodList
		if err := c.List(ctx, Pods, o.Namespace, o.Selector, &l); err != nil {
			if o.Errors != nil && ctx.Err() == nil {
				o.Errors("", err)
			}
		} else {
			listed := map[string]bool{}
			for i := range l.Items {
				p := &l.Items[i]
				if p.DeletionTimestamp != nil || (o.Accept != nil && !o.Accept(p)) {
					continue
				}
				listed[p.Name] = true
				if _, ok := following[p.Name]; ok {
					continue
				}
				pctx, cancel := context.WithCancel(ctx)
				following[p.Name] = cancel
				wg.Add(1)
				go func(name string) {
					defer wg.Done()
					c.followPod(pctx, o, name)
				}(p.Name)
			}
			for name, cancel := range following {
				if !listed[name] {
					// Gone: give its stream a moment to deliver its last
					// lines, then stop it.
					time.AfterFunc(o.Relist, cancel)
					delete(following, name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Relist):
		}
	}
}

// FollowPodLog follows one pod's log (o's Container, Line and Errors;
// not its Namespace's other pods) until ctx ends, reconnecting as
// FollowLogs does.
func (c *Client) FollowPodLog(ctx context.Context, o FollowOptions, pod string) {
	c.followPod(ctx, o, pod)
}

// followPod follows one pod's log until ctx ends.
func (c *Client) followPod(ctx context.Context, o FollowOptions, pod string) {
	seed := maphash.MakeSeed()
	seen := map[uint64]bool{}
	var order []uint64
	var last time.Time
	for ctx.Err() == nil {
		q := url.Values{"follow": {"true"}}
		if o.Container != "" {
			q.Set("container", o.Container)
		}
		if !last.IsZero() {
			q.Set("sinceTime", last.Add(-time.Second).UTC().Format(time.RFC3339))
		}
		resp, err := c.send(ctx, "GET", Pods.path(o.Namespace, pod)+"/log", q, nil, "")
		if err != nil {
			if o.Errors != nil && ctx.Err() == nil {
				o.Errors(pod, err)
			}
		} else {
			r := bufio.NewReaderSize(resp.Body, MaxLogLine)
			long := false
			for {
				line, err := r.ReadSlice('\n')
				if errors.Is(err, bufio.ErrBufferFull) {
					long = true // skip to the end of this line
					continue
				}
				if err != nil {
					// A last line without its newline is not passed on:
					// the reconnected stream sends it whole.
					break
				}
				if long {
					long = false
					continue
				}
				line = line[:len(line)-1]
				h := maphash.Bytes(seed, line)
				if seen[h] {
					continue
				}
				seen[h] = true
				order = append(order, h)
				if len(order) > LogSeen {
					delete(seen, order[0])
					order = order[1:]
				}
				last = time.Now()
				o.Line(pod, line)
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxLogLine))
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// PodLogTail returns the last lines (at most 16KiB) of a container's log
// in a pod, followed or not (an init container's that failed).
func (c *Client) PodLogTail(ctx context.Context, ns, pod, container string, lines int) ([]byte, error) {
	q := url.Values{"container": {container}, "tailLines": {strconv.Itoa(lines)}, "limitBytes": {"16384"}}
	resp, err := c.send(ctx, "GET", Pods.path(ns, pod)+"/log", q, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 16384))
}
