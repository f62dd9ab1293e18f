package safetensors

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads the JSON header token by token straight from its bytes:
// nothing is buffered or materialised beyond the names, strings and the
// few numbers a header is allowed to hold, so a hostile array or string
// costs at most its own length once, and an array longer than its limit is
// refused at the first element past it. The input is valid UTF-8 (checked
// before scanning).
type scanner struct {
	b []byte
	i int
}

// errAt is a syntax error at the scanner's offset.
func (s *scanner) errAt(f string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(f, args...))
}

// ws skips JSON whitespace.
func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// expect consumes c (after whitespace) or fails.
func (s *scanner) expect(c byte) error {
	if got := s.peek(); got != c {
		if got == 0 {
			return s.errAt("unexpected end of JSON, want %q", c)
		}
		return s.errAt("invalid character %q, want %q", got, c)
	}
	s.i++
	return nil
}

// next consumes c (after whitespace) if it is next.
func (s *scanner) next(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// more reports whether an object or array continues after an element:
// true after a ',', false after close; anything else is an error.
func (s *scanner) more(close byte) (bool, error) {
	if s.next(',') {
		return true, nil
	}
	return false, s.expect(close)
}

// literal consumes the literal word (null, true, false) if it is next.
func (s *scanner) literal(word string) bool {
	s.ws()
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// str reads a JSON string. Unpaired surrogates in \u escapes become
// U+FFFD, as encoding/json decodes them.
func (s *scanner) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// strBytes reads a JSON string into bytes that alias the input when the
// string has no escapes.
func (s *scanner) strBytes() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], nil
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return nil, s.errAt("control character %#x in string", c)
		}
		s.i++
	}
	return nil, s.errAt("unexpected end of JSON in string")
}

// escaped finishes a string that started at start and has an escape at
// the scanner's offset.
func (s *scanner) escaped(start int) ([]byte, error) {
	// The decoded string is no longer than its JSON: size the output once
	// to the JSON up to the closing quote (or the end), never by append's
	// steps, which for a huge string would allocate several times it.
	end := s.i
	for end < len(s.b) && s.b[end] != '"' {
		if s.b[end] == '\\' {
			end++
		}
		end++
	}
	out := make([]byte, 0, min(end, len(s.b))-start)
	out = append(out, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out, nil
		case c < 0x20:
			return nil, s.errAt("control character %#x in string", c)
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 == len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, s.errAt("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; anything else, U+FFFD, and the
				// escape after it stands alone.
				d := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if r2, ok := s.hex4(); ok {
						d = utf16.DecodeRune(r, r2)
					}
					if d == utf8.RuneError {
						s.i = save
					}
				}
				r = d
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.errAt("invalid escape %q", "\\"+string(e))
		}
	}
	return nil, s.errAt("unexpected end of JSON in string")
}

// hex4 reads the four hex digits of a \u escape.
func (s *scanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// uint reads a JSON number that must be an unsigned integer fitting a
// uint64 (no sign, fraction or exponent).
func (s *scanner) uint() (uint64, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	digits := s.b[start:s.i]
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '-', '+', '.', 'e', 'E':
			return 0, s.errAt("number is not an unsigned integer")
		}
	}
	switch {
	case len(digits) == 0:
		return 0, s.errAt("want an unsigned integer")
	case len(digits) > 1 && digits[0] == '0':
		return 0, s.errAt("number with a leading zero")
	}
	v, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil {
		return 0, s.errAt("number %s overflows uint64", digits)
	}
	return v, nil
}

// errTooLong is uints' error for an array longer than its buffer.
var errTooLong = errors.New("too many elements")

// uints reads an array of unsigned integers into buf, refusing it with
// errTooLong at element len(buf)+1 before reading further, so a huge array
// costs nothing. The result aliases buf.
func (s *scanner) uints(buf []uint64) ([]uint64, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	n := 0
	if s.next(']') {
		return buf[:0], nil
	}
	for {
		if n == len(buf) {
			return nil, errTooLong
		}
		x, err := s.uint()
		if err != nil {
			return nil, err
		}
		buf[n] = x
		n++
		more, err := s.more(']')
		if err != nil || !more {
			return buf[:n], err
		}
	}
}
