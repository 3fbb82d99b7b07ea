package x25519

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"math/big"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"filippo.io/age"
	"golang.org/x/crypto/curve25519"
)

// x25519Ref is curve25519.X25519(e, u), with the all-zero result it
// refuses to return (a low-order u) as all zeros.
func x25519Ref(t testing.TB, e, u [32]byte) [32]byte {
	t.Helper()
	out, err := curve25519.X25519(e[:], u[:])
	if err != nil {
		return [32]byte{} // the only refusal left: inputs are 32 bytes
	}
	return [32]byte(out)
}

// prime is p = 2^255 - 19.
var prime = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// hasEdwardsPoint says, by math/big and not by the field code under test,
// whether u (read as RFC 7748 reads it) is the u-coordinate of a point of
// Curve25519 that the birational map takes to the Edwards curve: u ≠ -1
// and u³ + 486662u² + u a square mod p. The other u are on the twist.
func hasEdwardsPoint(u [32]byte) bool {
	u[31] &= 127
	le := slices.Clone(u[:])
	slices.Reverse(le)
	x := new(big.Int).Mod(new(big.Int).SetBytes(le), prime)
	if new(big.Int).Add(x, big.NewInt(1)).Cmp(prime) == 0 {
		return false
	}
	rhs := new(big.Int).Mul(x, x)
	rhs.Mul(rhs, x)
	rhs.Add(rhs, new(big.Int).Mul(big.NewInt(486662), new(big.Int).Mul(x, x)))
	rhs.Add(rhs, x)
	rhs.Mod(rhs, prime)
	return big.Jacobi(rhs, prime) >= 0
}

// le32 writes n mod 2^256 as 32 little-endian bytes.
func le32(n *big.Int) [32]byte {
	var out [32]byte
	b := new(big.Int).Mod(n, new(big.Int).Lsh(big.NewInt(1), 256)).FillBytes(make([]byte, 32))
	slices.Reverse(b)
	copy(out[:], b)
	return out
}

func randomKey(t testing.TB) [32]byte {
	t.Helper()
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return k
}

// publicKey returns X25519(random, 9): a real age recipient's key.
func publicKey(t testing.TB) [32]byte {
	t.Helper()
	k := randomKey(t)
	return x25519Ref(t, k, [32]byte{0: 9})
}

// edgeScalars are scalars at the edges of clamping, and random ones.
func edgeScalars(t testing.TB, random int) [][32]byte {
	var ones, top [32]byte
	for i := range ones {
		ones[i] = 0xff
	}
	top[31] = 0x80
	s := [][32]byte{{}, ones, {0: 8}, {31: 0x7f}, top, {0: 7, 31: 0x40}}
	for range random {
		s = append(s, randomKey(t))
	}
	return s
}

// TestCombIsX25519 compares the table with curve25519.X25519: for real
// public keys the table is built and its product is X25519's; for every
// other 32 bytes either the table is built and agrees, or no table is
// built exactly when u has no Edwards point, and the recipient's shared
// secret (then the ladder's) still agrees.
func TestCombIsX25519(t *testing.T) {
	pMinus1 := le32(new(big.Int).Sub(prime, big.NewInt(1)))
	var allOnes [32]byte
	for i := range allOnes {
		allOnes[i] = 0xff
	}
	lowOrder := []string{
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
		"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	}
	fixed := [][32]byte{
		{},          // u = 0, the point of order 2
		{0: 1},      // u = 1, order 4
		pMinus1,     // u = -1, no Edwards point
		le32(prime), // u = p, read as 0
		le32(new(big.Int).Add(prime, big.NewInt(1))), // p + 1, read as 1
		le32(new(big.Int).Add(prime, big.NewInt(9))), // p + 9, the base point
		allOnes,          // 2^256 - 1: top bit ignored, then p + 18
		{0: 9},           // the base point
		{0: 9, 31: 0x80}, // the base point with the high bit set
	}
	for _, s := range lowOrder {
		fixed = append(fixed, hex32(t, s))
	}

	var realKeys, randomU [][32]byte
	for range 150 {
		realKeys = append(realKeys, publicKey(t))
	}
	for range 600 {
		randomU = append(randomU, randomKey(t)) // high bit set in half
	}
	for _, tt := range []struct {
		name       string
		points     [][32]byte
		scalars    int // random scalars per point, besides the edges
		allOnCurve bool
	}{
		{"real public keys", realKeys, 14, true},
		{"random u", randomU, 2, false},
		{"special u", fixed, 30, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tables, fallbacks := 0, 0
			for _, u := range tt.points {
				c := newCombTable(&u)
				if (c != nil) != hasEdwardsPoint(u) {
					t.Fatalf("u = %x: table built %v, but has an Edwards point: %v", u, c != nil, hasEdwardsPoint(u))
				}
				if tt.allOnCurve && c == nil {
					t.Fatalf("no table for the public key %x", u)
				}
				if c == nil {
					fallbacks++
				} else {
					tables++
				}
				r := &Recipient{their: u}
				for i, e := range edgeScalars(t, tt.scalars) {
					want := x25519Ref(t, e, u)
					if c != nil {
						if got := c.mult(&e); got != want {
							t.Fatalf("table: X25519(%x, %x) = %x, want %x", e, u, got, want)
						}
					}
					if got := r.sharedSecret(&e); got != want {
						t.Fatalf("recipient, use %d: X25519(%x, %x) = %x, want %x", i+1, e, u, got, want)
					}
				}
				if (r.comb.Load() != nil) != (c != nil) {
					t.Fatalf("u = %x: the recipient's table is %v, want %v", u, r.comb.Load() != nil, c != nil)
				}
			}
			// Both paths were taken where both are possible.
			if tables == 0 || (!tt.allOnCurve && fallbacks == 0) {
				t.Fatalf("%d tables, %d fallbacks to the ladder", tables, fallbacks)
			}
		})
	}
}

// TestCombRFC7748 runs RFC 7748's test vectors through the table. The
// point of section 5.2's second vector, e5210f…, is on the twist (its
// high bit set, and, read without it, no point of Curve25519): it gets no
// table, and the recipient's ladder gives the vector's result.
func TestCombRFC7748(t *testing.T) {
	for _, v := range []struct {
		scalar, point, want string
		twist               bool
	}{
		// Section 5.2.
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4", "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c", "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552", false},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d", "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493", "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957", true},
		// Section 6.1: both public keys, and the shared secret both ways.
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "0900000000000000000000000000000000000000000000000000000000000000", "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", false},
		{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", "0900000000000000000000000000000000000000000000000000000000000000", "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", false},
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742", false},
		{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742", false},
	} {
		e, u, want := hex32(t, v.scalar), hex32(t, v.point), hex32(t, v.want)
		if hasEdwardsPoint(u) == v.twist {
			t.Fatalf("%s: on the twist is %v, the vector says %v", v.point, !hasEdwardsPoint(u), v.twist)
		}
		c := newCombTable(&u)
		if (c == nil) != v.twist {
			t.Fatalf("%s: table built %v, want %v", v.point, c != nil, !v.twist)
		}
		if c != nil {
			if got := c.mult(&e); got != want {
				t.Errorf("table: X25519(%s, %s) = %x, want %s", v.scalar, v.point, got, v.want)
			}
		}
		r := &Recipient{their: u}
		for use := range 3 {
			if got := r.sharedSecret(&e); got != want {
				t.Errorf("recipient, use %d: X25519(%s, %s) = %x, want %s", use+1, v.scalar, v.point, got, v.want)
			}
		}
	}

	// Section 5.2's iteration, k, u = X25519(k, u), k, from k = u = 9:
	// every step a new table.
	k, u := [32]byte{0: 9}, [32]byte{0: 9}
	for i := 1; i <= 1000; i++ {
		c := newCombTable(&u)
		if c == nil {
			t.Fatalf("iteration %d: no table for %x", i, u)
		}
		k, u = c.mult(&k), k
		switch i {
		case 1:
			if want := hex32(t, "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"); k != want {
				t.Fatalf("after one iteration %x, want %x", k, want)
			}
		case 1000:
			if want := hex32(t, "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"); k != want {
				t.Fatalf("after 1,000 iterations %x, want %x", k, want)
			}
		}
	}
}

// FuzzCombIsX25519: for any scalar and any u, the table (when u has an
// Edwards point) and the recipient's shared secret are X25519's.
func FuzzCombIsX25519(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0}, 32), bytes.Repeat([]byte{0}, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 32))
	f.Add(mustHex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"), mustHex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"))
	f.Add(mustHex("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d"), mustHex("e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493"))
	f.Add(bytes.Repeat([]byte{0x11}, 32), append([]byte{9}, make([]byte, 31)...))
	f.Add(bytes.Repeat([]byte{0x22}, 32), mustHex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"))
	f.Fuzz(func(t *testing.T, scalar, u []byte) {
		// Any length: cut to 32 bytes or padded with zeros, so that no
		// input is wasted.
		var e, pt [32]byte
		copy(e[:], scalar)
		copy(pt[:], u)
		want := x25519Ref(t, e, pt)
		c := newCombTable(&pt)
		if (c != nil) != hasEdwardsPoint(pt) {
			t.Fatalf("u = %x: table built %v, but has an Edwards point: %v", pt, c != nil, hasEdwardsPoint(pt))
		}
		if c != nil {
			if got := c.mult(&e); got != want {
				t.Fatalf("table: X25519(%x, %x) = %x, want %x", e, pt, got, want)
			}
		}
		r := &Recipient{their: pt}
		for range 3 {
			if got := r.sharedSecret(&e); got != want {
				t.Fatalf("recipient: X25519(%x, %x) = %x, want %x", e, pt, got, want)
			}
		}
	})
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestSignedRadix16: the digits are in [-8, 8] and sum back to k, for the
// largest clamped scalar, the smallest, and random ones.
func TestSignedRadix16(t *testing.T) {
	for _, e := range edgeScalars(t, 500) {
		k := e
		k[0] &= 248
		k[31] &= 127
		k[31] |= 64
		digits := signedRadix16(&k)
		sum := new(big.Int)
		for i := 63; i >= 0; i-- {
			if digits[i] < -8 || digits[i] > 8 {
				t.Fatalf("k = %x: digit %d is %d", k, i, digits[i])
			}
			sum.Lsh(sum, 4)
			sum.Add(sum, big.NewInt(int64(digits[i])))
		}
		if le32(sum) != k {
			t.Fatalf("k = %x: digits sum to %x", k, le32(sum))
		}
	}
}

// TestAgeOpensWhatTheTableSealed wraps to the same recipients many times,
// so that all but the first wrap go through the table, and opens each file
// with age's identity.
func TestAgeOpensWhatTheTableSealed(t *testing.T) {
	for range 4 {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Parse(id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 25 {
			plain := bytes.Repeat([]byte{byte(i)}, 32)
			ct := encrypt(t, r, plain)
			if i >= 1 && r.comb.Load() == nil {
				t.Fatalf("no table after %d wraps", i+1)
			}
			openAndCheck(t, id, ct, plain)
		}
	}
}

func openAndCheck(t testing.TB, id age.Identity, ct, plain []byte) {
	t.Helper()
	rd, err := age.Decrypt(bytes.NewReader(ct), id)
	if err != nil {
		t.Fatalf("age cannot open what was sealed: %v", err)
	}
	got, err := io.ReadAll(rd)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("opened %d bytes, want %d: %v", len(got), len(plain), err)
	}
}

// TestRecipientConcurrentUse wraps to one fresh recipient from many
// goroutines at once (run with -race), while its table is being built,
// and opens every file with age.
func TestRecipientConcurrentUse(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, err := Parse(id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		const goroutines, wraps = 8, 12
		cts := make([][][]byte, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range wraps {
					var buf bytes.Buffer
					w, err := age.Encrypt(&buf, r)
					if err == nil {
						_, err = w.Write([]byte{byte(g), byte(i)})
					}
					if err == nil {
						err = w.Close()
					}
					if err != nil {
						errs[g] = err
						return
					}
					cts[g] = append(cts[g], buf.Bytes())
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if r.comb.Load() == nil {
			t.Fatal("no table after many wraps")
		}
		for g := range goroutines {
			for i, ct := range cts[g] {
				openAndCheck(t, id, ct, []byte{byte(g), byte(i)})
			}
		}
	}
}

// BenchmarkSharedSecret is one shared-secret multiplication by the ladder
// and by a recipient's table.
func BenchmarkSharedSecret(b *testing.B) {
	e, u := randomKey(b), publicKey(b)
	c := newCombTable(&u)
	b.Run("ladder", func(b *testing.B) {
		for b.Loop() {
			scalarMult(&e, &u)
		}
	})
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			c.mult(&e)
		}
	})
}

// BenchmarkTable is the cost of building a recipient's table, and its
// size.
func BenchmarkTable(b *testing.B) {
	u := publicKey(b)
	for b.Loop() {
		newCombTable(&u)
	}
	b.ReportMetric(float64(unsafe.Sizeof(combTable{})), "table-bytes")
}
