package x25519

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
)

func encrypt(t testing.TB, r age.Recipient, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAgeOpensIt seals to many real age recipients and opens each with
// age's own identity: the stanza is age's, byte for byte in form.
func TestAgeOpensIt(t *testing.T) {
	other, _ := age.GenerateX25519Identity()
	for i := range 200 {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Parse(id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		plain := bytes.Repeat([]byte{byte(i)}, i+1)
		ct := encrypt(t, r, plain)
		rd, err := age.Decrypt(bytes.NewReader(ct), id)
		if err != nil {
			t.Fatalf("age cannot open what was sealed to %s: %v", id.Recipient(), err)
		}
		got, err := io.ReadAll(rd)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("opened %d bytes, want %d: %v", len(got), len(plain), err)
		}
		var nomatch *age.NoIdentityMatchError
		if _, err := age.Decrypt(bytes.NewReader(ct), other); !errors.As(err, &nomatch) {
			t.Fatalf("another identity: %v, want no identity match", err)
		}
		// The header has the shape age writes: one X25519 stanza with a
		// 32-byte share (43 base64 characters) and a 32-byte body.
		hdr := string(ct[:bytes.Index(ct, []byte("\n---"))])
		lines := strings.Split(hdr, "\n")
		if len(lines) != 3 || lines[0] != "age-encryption.org/v1" || !strings.HasPrefix(lines[1], "-> X25519 ") || len(lines[1]) != len("-> X25519 ")+43 || len(lines[2]) != 43 {
			t.Fatalf("header %q is not age's X25519 stanza", hdr)
		}
	}
}

// TestParseRefusesWhatAgeRefuses: every string age refuses is refused, and
// a string age takes decodes to the key age uses.
func TestParseRefusesWhatAgeRefuses(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	good := id.Recipient().String()
	flip := []byte(good)
	flip[10] = map[bool]byte{true: 'q', false: 'p'}[flip[10] != 'q']
	for _, s := range []string{
		"",
		"age1",
		strings.ToUpper(good),
		good[:len(good)-1],
		string(flip),
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEiG",
		"AGE-SECRET-KEY-1" + strings.Repeat("Q", 58),
		good + "q",
	} {
		_, ageErr := age.ParseX25519Recipient(s)
		if _, err := Parse(s); (err == nil) != (ageErr == nil) || err == nil {
			t.Errorf("Parse(%q): %v, age says %v; want refused", s, err, ageErr)
		}
	}
	r, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	// The identity's own public key is the one decoded.
	sk, err := age.ParseX25519Identity(id.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := age.Decrypt(bytes.NewReader(encrypt(t, r, []byte("x"))), sk); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeBech32(t *testing.T) {
	for _, tt := range []struct {
		in, hrp string
		data    []byte
		err     string
	}{
		// BIP 173's valid test vectors.
		{in: "a12uel5l", hrp: "a", data: []byte{}},
		{in: "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw", hrp: "abcdef", data: []byte{0x00, 0x44, 0x32, 0x14, 0xc7, 0x42, 0x54, 0xb6, 0x35, 0xcf, 0x84, 0x65, 0x3a, 0x56, 0xd7, 0xc6, 0x75, 0xbe, 0x77, 0xdf}},
		{in: "a12uel5m", err: "invalid checksum"},
		{in: "pzry9x0s0muk", err: "no separator"},
		{in: "A12UEL5L", err: "not lower case"},
		{in: "a1b2uel5l", err: "invalid character"},
	} {
		hrp, data, err := decodeBech32(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: %v, want %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || hrp != tt.hrp || !bytes.Equal(data, tt.data) {
			t.Errorf("%s: %q %x %v, want %q %x", tt.in, hrp, data, err, tt.hrp, tt.data)
		}
	}
}

// BenchmarkWrap compares age's X25519 recipient with this one: the time to
// seal one small value.
func BenchmarkWrap(b *testing.B) {
	id, _ := age.GenerateX25519Identity()
	ours, err := Parse(id.Recipient().String())
	if err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct {
		name string
		r    age.Recipient
	}{{"age", id.Recipient()}, {"x25519", ours}} {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				encrypt(b, bb.r, []byte("a value of 32 characters, say..."))
			}
		})
	}
}

// FuzzParse: Parse takes exactly what age takes, and what it takes it
// reads as the 32-byte key age's own bech32 holds (checked by encoding it
// back with age's recipient of the same key).
func FuzzParse(f *testing.F) {
	for range 4 {
		id, _ := age.GenerateX25519Identity()
		f.Add(id.Recipient().String())
	}
	f.Add("age1")
	f.Add("age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq")
	f.Fuzz(func(t *testing.T, s string) {
		ar, ageErr := age.ParseX25519Recipient(s)
		r, err := Parse(s)
		if (err == nil) != (ageErr == nil) {
			t.Fatalf("Parse(%q): %v, age: %v", s, err, ageErr)
		}
		if err != nil {
			return
		}
		back, err := age.ParseX25519Recipient(encodeAge(t, r.their.Bytes()))
		if err != nil || back.String() != ar.String() {
			t.Fatalf("Parse(%q) read another key: %v", s, err)
		}
	})
}

// encodeAge writes a 32-byte key as an "age1..." recipient (bech32), the
// test's own encoder to check decodeBech32 against.
func encodeAge(t *testing.T, key []byte) string {
	t.Helper()
	var values []byte
	acc, bits := uint32(0), uint(0)
	for _, b := range key {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			values = append(values, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		values = append(values, byte(acc<<(5-bits))&31)
	}
	hrp := "age"
	var pre []byte
	for i := 0; i < len(hrp); i++ {
		pre = append(pre, hrp[i]>>5)
	}
	pre = append(pre, 0)
	for i := 0; i < len(hrp); i++ {
		pre = append(pre, hrp[i]&31)
	}
	mod := polymod(append(append(pre, values...), 0, 0, 0, 0, 0, 0)) ^ 1
	out := hrp + "1"
	for _, v := range values {
		out += string(charset[v])
	}
	for p := range 6 {
		out += string(charset[byte(mod>>(5*(5-p)))&31])
	}
	return out
}
