// Package gguf writes GGUF files, the model format of llama.cpp and Ollama:
// a header, typed key–value metadata, tensor descriptions, then the
// tensors' data, each aligned. perfgate uses it to make small models with
// random weights that a real engine loads and runs, so a real engine can be
// measured on a machine that can download nothing.
//
// The layout follows ggml's gguf.h (version 3, little-endian).
package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Version is the GGUF format version written.
const Version = 3

// Alignment is the default data alignment (general.alignment).
const Alignment = 32

// Metadata value types (gguf_type).
const (
	typeUint8   uint32 = 0
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
	typeUint32  uint32 = 4
)

// TensorType is a ggml tensor type.
type TensorType uint32

// The tensor types this writer encodes.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q8_0 TensorType = 8
)

// String names a tensor type as llama.cpp prints it.
func (t TensorType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Q8_0:
		return "q8_0"
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// q8Block is the number of values in one Q8_0 block (an f16 scale and 32
// int8 values).
const q8Block = 32

// size is the encoded size of n values of type t.
func (t TensorType) size(n int) (int, error) {
	switch t {
	case F32:
		return 4 * n, nil
	case F16:
		return 2 * n, nil
	case Q8_0:
		if n%q8Block != 0 {
			return 0, fmt.Errorf("q8_0 needs a multiple of %d values, got %d", q8Block, n)
		}
		return n / q8Block * (2 + q8Block), nil
	}
	return 0, fmt.Errorf("tensor type %d is not supported", uint32(t))
}

// KV is one metadata entry. Value is a string, bool, uint32, int32,
// float32, []string, []int32 or []float32.
type KV struct {
	Key   string
	Value any
}

// Tensor is one tensor: Dims lists ne[0] first (the innermost, contiguous
// dimension), as ggml does; Data holds the values row-major in that order.
type Tensor struct {
	Name string
	Type TensorType
	Dims []uint64
	Data []float32
}

func (t Tensor) count() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// Write writes a GGUF file of the given metadata and tensors.
func Write(w io.Writer, kvs []KV, tensors []Tensor) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.raw([]byte("GGUF"))
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("gguf: metadata %s: %w", kv.Key, err)
		}
	}
	var offset uint64
	sizes := make([]int, len(tensors))
	for i, t := range tensors {
		if t.count() != len(t.Data) {
			return fmt.Errorf("gguf: tensor %s: dims %v hold %d values, data has %d", t.Name, t.Dims, t.count(), len(t.Data))
		}
		size, err := t.Type.size(len(t.Data))
		if err != nil {
			return fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
		}
		sizes[i] = size
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offset)
		offset = align(offset + uint64(size))
	}
	e.pad()
	for i, t := range tensors {
		start := e.n
		e.tensor(t)
		if e.err == nil && e.n-start != uint64(sizes[i]) {
			return fmt.Errorf("gguf: tensor %s: wrote %d bytes, expected %d", t.Name, e.n-start, sizes[i])
		}
		e.pad()
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

func align(n uint64) uint64 {
	return (n + Alignment - 1) / Alignment * Alignment
}

// encoder writes little-endian values, counting bytes and keeping the
// first error.
type encoder struct {
	w   io.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += uint64(n)
	e.err = err
}

func (e *encoder) u8(v uint8) { e.raw([]byte{v}) }

func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:2], v)
	e.raw(e.buf[:2])
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *encoder) pad() {
	if rem := e.n % Alignment; rem != 0 {
		e.raw(make([]byte, Alignment-rem))
	}
}

func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case string:
		e.u32(typeString)
		e.str(v)
	case bool:
		e.u32(typeBool)
		if v {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint32:
		e.u32(typeUint32)
		e.u32(v)
	case int32:
		e.u32(typeInt32)
		e.u32(uint32(v))
	case float32:
		e.u32(typeFloat32)
		e.u32(math.Float32bits(v))
	case []string:
		e.u32(typeArray)
		e.u32(typeString)
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	case []int32:
		e.u32(typeArray)
		e.u32(typeInt32)
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []float32:
		e.u32(typeArray)
		e.u32(typeFloat32)
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(math.Float32bits(x))
		}
	default:
		return fmt.Errorf("value of type %T is not supported", v)
	}
	return nil
}

func (e *encoder) tensor(t Tensor) {
	switch t.Type {
	case F32:
		for _, x := range t.Data {
			e.u32(math.Float32bits(x))
		}
	case F16:
		for _, x := range t.Data {
			e.u16(Float16(x))
		}
	case Q8_0:
		block := make([]byte, 2+q8Block)
		for i := 0; i < len(t.Data); i += q8Block {
			encodeQ8(block, t.Data[i:i+q8Block])
			e.raw(block)
		}
	}
}

// encodeQ8 encodes 32 values as ggml's block_q8_0: the scale d = max|x|/127
// as f16, then round(x/d) as int8.
func encodeQ8(dst []byte, xs []float32) {
	var amax float32
	for _, x := range xs {
		amax = max(amax, float32(math.Abs(float64(x))))
	}
	d := amax / 127
	var inv float32
	if d != 0 {
		inv = 1 / d
	}
	binary.LittleEndian.PutUint16(dst[:2], Float16(d))
	for i, x := range xs {
		dst[2+i] = byte(int8(math.Round(float64(x * inv)))) //nolint:gosec // dst is a 2+32-byte block_q8_0 and xs its 32 values (encode's loop)
	}
}

// Float16 converts a float32 to IEEE 754 half precision bits, rounding to
// nearest even, with subnormals, infinities and NaN.
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127+15 >= 0x1f: // too large
		return sign | 0x7c00
	case exp-127+15 <= 0: // subnormal half or zero
		e := exp - 127 + 15
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	e := uint32(exp - 127 + 15)
	half := e<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is right
	}
	return sign | uint16(half)
}
