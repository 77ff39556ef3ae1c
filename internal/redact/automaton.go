package redact

import (
	"slices"
)

// The matcher is an Aho-Corasick automaton over bytes. States are numbered
// in breadth-first order, so the shallow states (depth <= denseDepth), where
// ordinary text keeps the automaton, come first and get full transition rows
// over byte classes; deeper states keep their children sparse and fall back
// along failure links. A transition target has matchFlag set when the
// target state ends a needle or has one in its failure chain, so the hot
// loop tests one bit per byte.

const (
	matchFlag = 1 << 31
	// specialFlag marks a denseOff cell that is not a premultiplied row
	// offset: its target ends a needle or is sparse (state id below).
	specialFlag = 1 << 30
	denseDepth  = 2
	// maxDenseCells bounds the dense table (4 bytes a cell).
	maxDenseCells = 8 << 20
)

type automaton struct {
	class  [256]byte
	nclass uint32
	nDense uint32
	dense  []uint32 // nDense rows of nclass flagged targets
	// denseOff is dense for the hot loop: an unflagged dense target as its
	// row offset (target*nclass, saving a multiply per byte), anything else
	// as specialFlag|flagged target.
	denseOff []uint32
	edgeOff  []uint32 // children of state s: keys/next[edgeOff[s]:edgeOff[s+1]]
	keys     []byte
	next     []uint32 // flagged
	fail     []uint32
	depth    []int32
	term     []int32  // needle ending exactly at the state, or -1
	outLink  []uint32 // nearest state on the failure chain with term >= 0, or 0
	maxLen   int
}

type edge struct {
	parent uint32
	key    byte
	child  uint32
}

// build makes the automaton for needles, which must be non-empty and
// distinct; needle i is reported as term i.
func build(needles [][]byte) *automaton {
	// Trie with provisional numbering.
	n := uint32(1)
	edges := []edge{}
	index := map[uint64]uint32{}
	termOf := map[uint32]int32{}
	maxLen := 0
	for i, nd := range needles {
		maxLen = max(maxLen, len(nd))
		s := uint32(0)
		for _, c := range nd {
			k := uint64(s)<<8 | uint64(c)
			t, ok := index[k]
			if !ok {
				t = n
				n++
				index[k] = t
				edges = append(edges, edge{s, c, t})
			}
			s = t
		}
		termOf[s] = int32(i)
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.parent != b.parent {
			return int(a.parent) - int(b.parent)
		}
		return int(a.key) - int(b.key)
	})
	off := make([]uint32, n+1)
	for _, e := range edges {
		off[e.parent+1]++
	}
	for i := uint32(1); i <= n; i++ {
		off[i] += off[i-1]
	}

	// Breadth-first renumbering: order[new] = old.
	order := make([]uint32, 0, n)
	renum := make([]uint32, n)
	order = append(order, 0)
	for q := 0; q < len(order); q++ {
		for _, e := range edges[off[order[q]]:off[order[q]+1]] {
			renum[e.child] = uint32(len(order))
			order = append(order, e.child)
		}
	}

	a := &automaton{
		edgeOff: make([]uint32, n+1),
		keys:    make([]byte, 0, len(edges)),
		next:    make([]uint32, 0, len(edges)),
		fail:    make([]uint32, n),
		depth:   make([]int32, n),
		term:    make([]int32, n),
		outLink: make([]uint32, n),
		maxLen:  maxLen,
	}
	for s, old := range order {
		a.edgeOff[s] = uint32(len(a.keys))
		for _, e := range edges[off[old]:off[old+1]] {
			a.keys = append(a.keys, e.key)
			a.next = append(a.next, renum[e.child])
		}
		a.term[s] = -1
		if t, ok := termOf[old]; ok {
			a.term[s] = t
		}
	}
	a.edgeOff[n] = uint32(len(a.keys))

	a.link()
	a.classes()
	a.makeDense()
	a.makeDenseOff()
	for i, t := range a.next {
		a.next[i] = a.flag(t)
	}
	return a
}

// child returns the child of s by c, or 0.
func (a *automaton) child(s uint32, c byte) uint32 {
	ks := a.keys[a.edgeOff[s]:a.edgeOff[s+1]]
	if i, ok := slices.BinarySearch(ks, c); ok {
		return a.next[a.edgeOff[s]+uint32(i)] &^ matchFlag
	}
	return 0
}

// link sets depth, failure and output links in breadth-first order.
func (a *automaton) link() {
	for s := range uint32(len(a.fail)) {
		for i := a.edgeOff[s]; i < a.edgeOff[s+1]; i++ {
			c, t := a.keys[i], a.next[i]
			a.depth[t] = a.depth[s] + 1
			if s != 0 {
				f := a.fail[s]
				for f != 0 && a.child(f, c) == 0 {
					f = a.fail[f]
				}
				a.fail[t] = a.child(f, c)
			}
			f := a.fail[t]
			if a.term[f] >= 0 {
				a.outLink[t] = f
			} else {
				a.outLink[t] = a.outLink[f]
			}
		}
	}
}

// breakClass is the class of CR and LF, which no needle contains (see
// isBreak): every state steps to itself on it.
const breakClass = 1

// isBreak reports whether c is a line break, which matching skips: a form
// wrapped over lines (MIME base64, PEM, a value cut by a terminal) still
// matches.
func isBreak(c byte) bool { return c == '\n' || c == '\r' }

// classes groups the bytes that no needle contains into class 0 and the
// line breaks into breakClass. Needles hold at most 254 distinct bytes (no
// breaks), so the classes fit in a byte.
func (a *automaton) classes() {
	var used [256]bool
	for _, c := range a.keys {
		used[c] = true
	}
	a.class['\n'], a.class['\r'] = breakClass, breakClass
	a.nclass = breakClass + 1
	for c := range 256 {
		if used[c] {
			a.class[c] = byte(a.nclass)
			a.nclass++
		}
	}
}

func (a *automaton) makeDense() {
	nd := uint32(0)
	for nd < uint32(len(a.depth)) && a.depth[nd] <= denseDepth &&
		uint64(nd+1)*uint64(a.nclass) <= maxDenseCells {
		nd++
	}
	a.nDense = nd
	a.dense = make([]uint32, uint64(nd)*uint64(a.nclass))
	var rep [256]int // a representative byte of each class
	for c := 255; c >= 0; c-- {
		rep[a.class[c]] = c
	}
	for s := range nd {
		row := a.dense[s*a.nclass : (s+1)*a.nclass]
		for k := range a.nclass {
			if k == breakClass {
				row[k] = s // unflagged: a match is reported once, at its last byte
				continue
			}
			c := byte(rep[k])
			t := a.child(s, c)
			if t == 0 && s != 0 {
				// The failure state is shallower, so its row is done.
				t = a.dense[a.fail[s]*a.nclass+k] &^ matchFlag
			}
			row[k] = a.flag(t)
		}
	}
}

// makeDenseOff derives denseOff from dense. Preconditions: makeDense ran;
// state ids and dense offsets stay below specialFlag (maxDenseCells and
// the state count keep them far below).
func (a *automaton) makeDenseOff() {
	a.denseOff = make([]uint32, len(a.dense))
	for i, t := range a.dense {
		if t&matchFlag != 0 || t >= a.nDense {
			a.denseOff[i] = specialFlag | t
		} else {
			a.denseOff[i] = t * a.nclass
		}
	}
}

func (a *automaton) flag(t uint32) uint32 {
	if a.term[t] >= 0 || a.outLink[t] != 0 {
		return t | matchFlag
	}
	return t
}

// slowStep is the transition from a sparse state s (unflagged).
func (a *automaton) slowStep(s uint32, c byte) uint32 {
	if isBreak(c) {
		return s
	}
	for s >= a.nDense {
		for i := a.edgeOff[s]; i < a.edgeOff[s+1]; i++ {
			if a.keys[i] == c {
				return a.next[i]
			}
		}
		s = a.fail[s]
	}
	return a.dense[s*a.nclass+uint32(a.class[c])]
}

// longest returns the needle and its length for the longest needle ending
// at flagged state s.
func (a *automaton) longest(s uint32) (needle int32, n int) {
	s &^= matchFlag
	if a.term[s] < 0 {
		s = a.outLink[s]
	}
	return a.term[s], int(a.depth[s])
}

// matchStart returns where the last n bytes other than line breaks before
// buf[i] begin: the first byte of a match of length n ending at i.
func matchStart(buf []byte, i, n int) int {
	for n > 0 {
		i--
		if !isBreak(buf[i]) {
			n--
		}
	}
	return i
}

// run steps from state s over buf[i:] until a flagged state or the end,
// returning the state and the index after the last byte consumed.
func (a *automaton) run(s uint32, buf []byte, i int) (uint32, int) {
	denseOff, class, nclass := a.denseOff, &a.class, a.nclass
	for i < len(buf) {
		if s >= a.nDense {
			s = a.slowStep(s, buf[i])
			i++
			if s&matchFlag != 0 {
				return s, i
			}
			continue
		}
		// Dense states: one table load per byte, no multiply.
		off := s * nclass
		for {
			v := denseOff[off+uint32(class[buf[i]])]
			i++
			if v&specialFlag != 0 {
				s = v &^ specialFlag
				if s&matchFlag != 0 {
					return s, i
				}
				break // a sparse state: the outer loop steps it
			}
			off = v
			if i == len(buf) {
				return off / nclass, i
			}
		}
	}
	return s, i
}
