package pystack

// lineAt is the source line of the code unit at byte offset addr in a
// 3.11+ location table (CPython's Objects/locations.md), starting from
// firstLine; -1 when the instruction has no line, 0 when addr is past
// the table or the table is malformed.
func lineAt(table []byte, firstLine int, addr int) int {
	unit := addr / 2
	line := firstLine
	pos := 0
	for i := 0; i < len(table); {
		b := table[i]
		if b&0x80 == 0 {
			return 0
		}
		code := int(b>>3) & 15
		n := int(b&7) + 1
		i++
		delta := 0
		switch {
		case code == 15: // no location
		case code == 14: // long form: line delta, end line, columns
			var ok bool
			if delta, i, ok = svarint(table, i); !ok {
				return 0
			}
			for k := 0; k < 3; k++ {
				if _, i, ok = varint(table, i); !ok {
					return 0
				}
			}
		case code == 13: // no columns
			var ok bool
			if delta, i, ok = svarint(table, i); !ok {
				return 0
			}
		case code >= 10: // one-line form: delta in the code, two column bytes
			delta = code - 10
			i += 2
		default: // short form: one column byte, same line
			i++
		}
		line += delta
		if unit >= pos && unit < pos+n {
			if code == 15 {
				return -1
			}
			return line
		}
		pos += n
	}
	return 0
}

// varint reads 6-bit groups, least significant first, bit 6 set on all
// but the last.
func varint(b []byte, i int) (int, int, bool) {
	v, shift := 0, 0
	for ; i < len(b) && shift < 63; shift += 6 {
		c := int(b[i])
		i++
		v |= (c & 63) << shift
		if c&64 == 0 {
			return v, i, true
		}
	}
	return 0, i, false
}

// svarint is a varint whose low bit is the sign.
func svarint(b []byte, i int) (int, int, bool) {
	v, i, ok := varint(b, i)
	if v&1 != 0 {
		return -(v >> 1), i, ok
	}
	return v >> 1, i, ok
}
