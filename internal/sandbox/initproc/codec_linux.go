package initproc

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
)

// The config (host to init) and the report (init to host) travel in a
// compact binary form of their own rather than JSON: decoding JSON by
// reflection in a fresh process, whose type caches are cold, cost the
// init ~0.25 ms of CPU per start, more than all the rest of reading its
// config. The form: each struct's fields in declaration order; integers
// as varints, bools as one byte, strings and byte slices as a length and
// the bytes, a slice as its length and its elements, a pointer as a bool
// (present) and the struct. Both ends are of the same build
// (initbin_linux.go), so no version travels; TestCodecRoundTrip fills every
// field and fails on one the codec leaves out.

// errCodec is a config or report cut short or malformed.
var errCodec = errors.New("malformed sandbox message")

// encoder appends values to b.
type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	e.b = append(e.b, b...)
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) strs(ss []string) {
	e.uint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// decoder reads values from b; after the first error every read returns
// the zero value, and err says what went wrong.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = errCodec, nil }

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool {
	if len(d.b) == 0 || d.b[0] > 1 {
		d.fail()
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// count reads the length of a slice whose elements take at least one
// byte each: never more than what is left, so no length allocates more
// than the message holds.
func (d *decoder) count() int {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) raw() []byte {
	n := d.count()
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) bytes() []byte {
	b := d.raw()
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func (d *decoder) strs() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func (d *decoder) intVal() int {
	v := d.int()
	if v < math.MinInt || v > math.MaxInt {
		d.fail()
		return 0
	}
	return int(v)
}

// slice decodes n elements with elem.
func slice[T any](d *decoder, elem func(*decoder, *T)) []T {
	n := d.count()
	if n == 0 {
		return nil
	}
	s := make([]T, n)
	for i := range s {
		elem(d, &s[i])
	}
	return s
}

// encodeConfig is c in the codec's form.
func encodeConfig(c *initConfig) []byte {
	e := &encoder{b: make([]byte, 0, 4<<10)}
	e.str(c.Hostname)
	e.uint(uint64(len(c.SecretFiles)))
	for _, s := range c.SecretFiles {
		e.str(s.Name)
		e.bytes(s.Value)
	}
	e.bool(c.Egress)
	e.uint(uint64(len(c.Forwards)))
	for _, f := range c.Forwards {
		e.str(f.Listen)
		e.str(f.To)
	}
	e.uint(uint64(len(c.Transparent)))
	for _, p := range c.Transparent {
		e.int(int64(p))
	}
	e.bool(c.TTY)
	e.int(c.TmpSize)
	e.bool(c.ExecWritable)
	e.uint(uint64(len(c.Binds)))
	for i := range c.Binds {
		e.bind(&c.Binds[i])
	}
	e.bool(c.Root != nil)
	if c.Root != nil {
		e.bind(c.Root)
	}
	e.bool(c.Overlay != nil)
	if o := c.Overlay; o != nil {
		e.bind(&o.Lower)
		e.bind(&o.Layers)
		for _, l := range []layerDir{o.Upper, o.Work} {
			e.str(l.Rel)
			e.uint(l.Dev)
			e.uint(l.Ino)
		}
		e.bool(o.Exec)
	}
	w := &c.Workload
	e.strs(w.Args)
	e.strs(w.Env)
	e.str(w.Dir)
	e.uint(uint64(len(w.Landlock)))
	for _, r := range w.Landlock {
		e.str(r.Path)
		for _, b := range []bool{r.Read, r.Write, r.Exec, r.Ioctl, r.Optional} {
			e.bool(b)
		}
	}
	e.bool(w.NoLandlock)
	e.bytes(w.Seccomp)
	e.int(w.FileSize)
	e.int(w.Nproc)
	e.int(int64(w.Cgroup))
	e.int(int64(w.CgroupFD))
	e.int(int64(w.CgroupBackFD))
	e.int(int64(w.CgroupMaxFD))
	e.int(w.CgroupPids)
	e.strs(c.InputMasks)
	e.bool(c.Hold)
	return e.b
}

func (e *encoder) bind(b *bindSpec) {
	e.str(b.Source)
	e.str(b.Target)
	e.bool(b.Writable)
	e.bool(b.Exec)
	e.int(int64(b.IdmapFD))
	e.bool(b.File)
	e.bool(b.Cover)
	e.bool(b.KeepGit)
	e.uint(uint64(len(b.GitOps)))
	for _, op := range b.GitOps {
		e.str(op.Rel)
		e.uint(uint64(op.Op))
	}
	e.uint(b.Dev)
	e.uint(b.Ino)
}

// decodeConfig reads a config encodeConfig made; trailing bytes are an
// error.
func decodeConfig(b []byte) (*initConfig, error) {
	d := &decoder{b: b}
	c := &initConfig{}
	c.Hostname = d.str()
	c.SecretFiles = slice(d, func(d *decoder, s *secretFile) {
		s.Name = d.str()
		s.Value = d.bytes()
	})
	c.Egress = d.bool()
	c.Forwards = slice(d, func(d *decoder, f *forwardSpec) {
		f.Listen = d.str()
		f.To = d.str()
	})
	c.Transparent = slice(d, func(d *decoder, p *int) { *p = int(d.int()) })
	c.TTY = d.bool()
	c.TmpSize = d.int()
	c.ExecWritable = d.bool()
	c.Binds = slice(d, (*decoder).bind)
	if d.bool() {
		c.Root = &bindSpec{}
		d.bind(c.Root)
	}
	if d.bool() {
		o := &overlaySpec{}
		d.bind(&o.Lower)
		d.bind(&o.Layers)
		for _, l := range []*layerDir{&o.Upper, &o.Work} {
			l.Rel = d.str()
			l.Dev = d.uint()
			l.Ino = d.uint()
		}
		o.Exec = d.bool()
		c.Overlay = o
	}
	w := &c.Workload
	w.Args = d.strs()
	w.Env = d.strs()
	w.Dir = d.str()
	w.Landlock = slice(d, func(d *decoder, r *pathRule) {
		r.Path = d.str()
		for _, b := range []*bool{&r.Read, &r.Write, &r.Exec, &r.Ioctl, &r.Optional} {
			*b = d.bool()
		}
	})
	w.NoLandlock = d.bool()
	w.Seccomp = d.bytes()
	w.FileSize = d.int()
	w.Nproc = d.int()
	w.Cgroup = d.intVal()
	w.CgroupFD = d.intVal()
	w.CgroupBackFD = d.intVal()
	w.CgroupMaxFD = d.intVal()
	w.CgroupPids = d.int()
	c.InputMasks = d.strs()
	c.Hold = d.bool()
	if d.err == nil && len(d.b) > 0 {
		d.fail()
	}
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

func (d *decoder) bind(b *bindSpec) {
	b.Source = d.str()
	b.Target = d.str()
	b.Writable = d.bool()
	b.Exec = d.bool()
	b.IdmapFD = d.intVal()
	b.File = d.bool()
	b.Cover = d.bool()
	b.KeepGit = d.bool()
	b.GitOps = slice(d, func(d *decoder, op *gitOp) {
		op.Rel = d.str()
		op.Op = uint8(d.uint())
	})
	b.Dev = d.uint()
	b.Ino = d.uint()
}

// encodeReport is r in the codec's form: one write, one datagram-sized
// message (the host reads it with one read).
func encodeReport(r *initReport) []byte {
	e := &encoder{b: make([]byte, 0, 64+len(r.Error))}
	e.bool(r.Started)
	e.bool(r.Ready)
	e.str(r.Error)
	e.str(string(r.Layer))
	e.int(int64(r.Code))
	e.uint(r.ClaimBase)
	return e.b
}

// decodeReport reads a report encodeReport made.
func decodeReport(b []byte) (*initReport, error) {
	d := &decoder{b: b}
	r := &initReport{}
	r.Started = d.bool()
	r.Ready = d.bool()
	r.Error = d.str()
	r.Layer = Layer(d.str())
	r.Code = d.intVal()
	r.ClaimBase = d.uint()
	if d.err == nil && len(d.b) > 0 {
		d.fail()
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// writeReport sends r to the host over the control socket.
func writeReport(ctl *os.File, r initReport) error {
	_, err := ctl.Write(encodeReport(&r))
	return err
}

// readAll reads f to its end: the host closes its end of the config pipe
// once the config is written.
func readAll(f *os.File) ([]byte, error) {
	b := make([]byte, 0, 16<<10)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
