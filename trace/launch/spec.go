package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/coldtrace/coldtrace/internal/actor"
)

// Spec is what the shim needs to become the command.
type Spec struct {
	// Argv is the command line, argv[0] included.
	Argv []string
	// Env is the command's environment.
	Env []string
	// User is who the command runs as; the shim changes to it only when
	// SwitchUser is set.
	User       actor.User
	SwitchUser bool
}

const specMagic = "ctspec1\x00"

// encode writes s as length-prefixed bytes: strings are passed as they
// are, whatever their encoding.
func (s Spec) encode() []byte {
	b := []byte(specMagic)
	flag := uint64(0)
	if s.SwitchUser {
		flag = 1
	}
	b = binary.AppendUvarint(b, flag)
	b = binary.AppendUvarint(b, uint64(s.User.UID))
	b = binary.AppendUvarint(b, uint64(s.User.GID))
	b = binary.AppendUvarint(b, uint64(len(s.User.Groups)))
	for _, g := range s.User.Groups {
		b = binary.AppendUvarint(b, uint64(uint32(g)))
	}
	for _, list := range [][]string{s.Argv, s.Env} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for _, v := range list {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodeSpec is encode's inverse.
func decodeSpec(b []byte) (Spec, error) {
	rest, ok := strings.CutPrefix(string(b), specMagic)
	if !ok {
		return Spec{}, errors.New("not a shim spec")
	}
	r := specReader{b: []byte(rest)}
	var s Spec
	s.SwitchUser = r.uint() == 1
	s.User.UID, s.User.GID = uint32(r.uint()), uint32(r.uint())
	for n := r.count(); n > 0 && r.err == nil; n-- {
		s.User.Groups = append(s.User.Groups, int(uint32(r.uint())))
	}
	for _, list := range []*[]string{&s.Argv, &s.Env} {
		n := r.count()
		*list = make([]string, 0, n)
		for ; n > 0 && r.err == nil; n-- {
			*list = append(*list, r.str())
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes left over", len(r.b))
	}
	if r.err == nil && len(s.Argv) == 0 {
		r.err = errors.New("empty argv")
	}
	return s, r.err
}

type specReader struct {
	b   []byte
	err error
}

func (r *specReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated spec")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count is a list length, bounded by what is left to read.
func (r *specReader) count() int {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("list longer than the spec")
		return 0
	}
	return int(n)
}

func (r *specReader) str() string {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("string longer than the spec")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
