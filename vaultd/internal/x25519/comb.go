package x25519

// A fixed-base comb for one recipient's point: X25519(e, u) for a u that is
// used many times, in about a third of the ladder's time.
//
// The point types, the addition and doubling formulas, the constant-time
// table lookup and the signed radix-16 recoding are copied, written out
// plainly, from filippo.io/edwards25519 v1.2.0 (edwards25519.go, tables.go,
// scalarmult.go, scalar.go; Copyright 2017, 2019 The Go Authors, BSD
// 3-clause licence, maintained by Filippo Valsorda). That package does not
// export them, and its Scalar reduces modulo the group order, which X25519
// must not (see combTable.mult).

import (
	"crypto/subtle"

	"filippo.io/edwards25519/field"
)

// Curve constants. d is the constant of the Edwards curve
// -x² + y² = 1 + d·x²·y², birationally equivalent to Curve25519; d2 = 2d.
var (
	feOne = new(field.Element).One()
	d, _  = new(field.Element).SetBytes([]byte{
		0xa3, 0x78, 0x59, 0x13, 0xca, 0x4d, 0xeb, 0x75,
		0xab, 0xd8, 0x41, 0x41, 0x4d, 0x0a, 0x70, 0x00,
		0x98, 0xe8, 0x79, 0x77, 0x79, 0x40, 0xc7, 0x8c,
		0x73, 0xfe, 0x6f, 0x2b, 0xee, 0x6c, 0x03, 0x52})
	d2 = new(field.Element).Add(d, d)
)

// extPoint is a point in extended coordinates: x = X/Z, y = Y/Z, x·y = T/Z
// (Hisil, Wong, Carter, Dawson 2008). edwards25519's Point.
type extPoint struct {
	X, Y, Z, T field.Element
}

// projPoint is a point in projective coordinates, x = X/Z, y = Y/Z: what a
// doubling needs. edwards25519's projP2.
type projPoint struct {
	X, Y, Z field.Element
}

// completedPoint is the result of an addition or a doubling before its
// last multiplications: x = X/Z, y = Y/T. edwards25519's projP1xP1.
type completedPoint struct {
	X, Y, Z, T field.Element
}

// cachedPoint is a projective point ready to be added: Y+X, Y-X, Z, 2d·T.
// edwards25519's projCached; used only to build a table.
type cachedPoint struct {
	YplusX, YminusX, Z, T2d field.Element
}

// nielsPoint is an affine point ready to be added: y+x, y-x, 2d·x·y.
// edwards25519's affineCached; a table holds these.
type nielsPoint struct {
	YplusX, YminusX, T2d field.Element
}

// identity sets v to the neutral point (0, 1).
func (v *extPoint) identity() *extPoint {
	v.X.Zero()
	v.Y.One()
	v.Z.One()
	v.T.Zero()
	return v
}

// fromCompleted sets v = p.
func (v *extPoint) fromCompleted(p *completedPoint) *extPoint {
	v.X.Multiply(&p.X, &p.T)
	v.Y.Multiply(&p.Y, &p.Z)
	v.Z.Multiply(&p.Z, &p.T)
	v.T.Multiply(&p.X, &p.Y)
	return v
}

// fromCompleted sets v = p, without the T an extended point carries.
func (v *projPoint) fromCompleted(p *completedPoint) *projPoint {
	v.X.Multiply(&p.X, &p.T)
	v.Y.Multiply(&p.Y, &p.Z)
	v.Z.Multiply(&p.Z, &p.T)
	return v
}

// fromExt sets v = p.
func (v *projPoint) fromExt(p *extPoint) *projPoint {
	v.X.Set(&p.X)
	v.Y.Set(&p.Y)
	v.Z.Set(&p.Z)
	return v
}

// fromExt sets v = p.
func (v *cachedPoint) fromExt(p *extPoint) *cachedPoint {
	v.YplusX.Add(&p.Y, &p.X)
	v.YminusX.Subtract(&p.Y, &p.X)
	v.Z.Set(&p.Z)
	v.T2d.Multiply(&p.T, d2)
	return v
}

// add sets v = p + q ("add-2008-hwcd-3"). The formulas are complete on
// this curve (d is not a square): they hold for every pair of points,
// small-order ones included.
func (v *completedPoint) add(p *extPoint, q *cachedPoint) *completedPoint {
	var YplusX, YminusX, PP, MM, TT2d, ZZ2 field.Element
	YplusX.Add(&p.Y, &p.X)
	YminusX.Subtract(&p.Y, &p.X)
	PP.Multiply(&YplusX, &q.YplusX)
	MM.Multiply(&YminusX, &q.YminusX)
	TT2d.Multiply(&p.T, &q.T2d)
	ZZ2.Multiply(&p.Z, &q.Z)
	ZZ2.Add(&ZZ2, &ZZ2)
	v.X.Subtract(&PP, &MM)
	v.Y.Add(&PP, &MM)
	v.Z.Add(&ZZ2, &TT2d)
	v.T.Subtract(&ZZ2, &TT2d)
	return v
}

// addNiels sets v = p + q for an affine q ("madd-2008-hwcd-3"), three
// multiplications.
func (v *completedPoint) addNiels(p *extPoint, q *nielsPoint) *completedPoint {
	var YplusX, YminusX, PP, MM, TT2d, Z2 field.Element
	YplusX.Add(&p.Y, &p.X)
	YminusX.Subtract(&p.Y, &p.X)
	PP.Multiply(&YplusX, &q.YplusX)
	MM.Multiply(&YminusX, &q.YminusX)
	TT2d.Multiply(&p.T, &q.T2d)
	Z2.Add(&p.Z, &p.Z)
	v.X.Subtract(&PP, &MM)
	v.Y.Add(&PP, &MM)
	v.Z.Add(&Z2, &TT2d)
	v.T.Subtract(&Z2, &TT2d)
	return v
}

// double sets v = 2p ("dbl-2008-hwcd"), complete like add.
func (v *completedPoint) double(p *projPoint) *completedPoint {
	var XX, YY, ZZ2, XplusYsq field.Element
	XX.Square(&p.X)
	YY.Square(&p.Y)
	ZZ2.Square(&p.Z)
	ZZ2.Add(&ZZ2, &ZZ2)
	XplusYsq.Add(&p.X, &p.Y)
	XplusYsq.Square(&XplusYsq)
	v.Y.Add(&YY, &XX)
	v.Z.Subtract(&YY, &XX)
	v.X.Subtract(&XplusYsq, &v.Y)
	v.T.Subtract(&ZZ2, &v.Z)
	return v
}

// selectFrom sets v to a if cond == 1 and to b if cond == 0, in constant time.
func (v *nielsPoint) selectFrom(a, b *nielsPoint, cond int) {
	v.YplusX.Select(&a.YplusX, &b.YplusX, cond)
	v.YminusX.Select(&a.YminusX, &b.YminusX, cond)
	v.T2d.Select(&a.T2d, &b.T2d, cond)
}

// condNeg sets v = -v if cond == 1 and leaves it if cond == 0, in
// constant time: -(x, y) = (-x, y) swaps y+x and y-x and negates 2d·x·y.
func (v *nielsPoint) condNeg(cond int) {
	var neg field.Element
	v.YplusX.Swap(&v.YminusX, cond)
	v.T2d.Select(neg.Negate(&v.T2d), &v.T2d, cond)
}

// combTable is a recipient's fixed-base comb: comb[t][j-1] = j·2^(16t)·P
// for t = 0..15 and j = 1..8, where P is an Edwards point whose Montgomery
// u-coordinate is the recipient's key. 128 affine points of three field
// elements, 15,360 bytes.
type combTable [16][8]nielsPoint

// lookup sets v = x·comb[t][0], for -8 <= x <= 8, reading every entry of
// row t whatever x is: no branch and no index depends on x. As
// edwards25519's affineLookupTable.SelectInto.
func (c *combTable) lookup(v *nielsPoint, t int, x int8) {
	xmask := x >> 7
	xabs := uint8((x + xmask) ^ xmask) // |x|
	// The identity, (y+x, y-x, 2dxy) = (1, 1, 0).
	v.YplusX.One()
	v.YminusX.One()
	v.T2d.Zero()
	for j := 1; j <= 8; j++ {
		v.selectFrom(&c[t][j-1], v, subtle.ConstantTimeByteEq(xabs, uint8(j)))
	}
	v.condNeg(int(xmask & 1))
}

// newCombTable builds the comb for the Montgomery u-coordinate u (32 bytes,
// read as RFC 7748 reads it: the top bit ignored, a value >= p reduced).
// It returns nil when u has no point on the Edwards curve: u = -1, which
// the birational map leaves out, and every u on the twist. Such a
// recipient keeps the ladder. u is public; building needs no constant time.
func newCombTable(u *[32]byte) *combTable {
	var fu, y, z field.Element
	if _, err := fu.SetBytes(u[:]); err != nil {
		return nil
	}
	// y = (u - 1) / (u + 1), kept as Y/Z to save an inversion.
	y.Subtract(&fu, feOne)
	z.Add(&fu, feOne)
	if z.Equal(new(field.Element).Zero()) == 1 {
		return nil
	}
	// x² = (y² - 1) / (d·y² + 1) = (Y² - Z²) / (d·Y² + Z²); either root
	// will do, as u(kP) = u(-kP).
	var yy, zz, num, den field.Element
	yy.Square(&y)
	zz.Square(&z)
	num.Subtract(&yy, &zz)
	den.Multiply(&yy, d)
	den.Add(&den, &zz)
	x, wasSquare := new(field.Element).SqrtRatio(&num, &den)
	if wasSquare != 1 {
		return nil
	}
	// P = (x, Y/Z) = (x·Z : Y : Z : x·Y).
	var p extPoint
	p.X.Multiply(x, &z)
	p.Y.Set(&y)
	p.Z.Set(&z)
	p.T.Multiply(x, &y)

	// pts[t][j-1] = j·2^(16t)·P in extended coordinates, then all made
	// affine with one inversion.
	var pts [16][8]extPoint
	var cp completedPoint
	var pp projPoint
	var cached cachedPoint
	for t := range pts {
		row := &pts[t]
		row[0] = p
		cached.fromExt(&p)
		row[1].fromCompleted(cp.double(pp.fromExt(&p)))
		for j := 2; j < 8; j++ {
			row[j].fromCompleted(cp.add(&row[j-1], &cached))
		}
		if t == len(pts)-1 {
			break
		}
		// 2^16·P from 8·P: thirteen doublings.
		pp.fromExt(&row[7])
		for range 12 {
			pp.fromCompleted(cp.double(&pp))
		}
		p.fromCompleted(cp.double(&pp))
	}

	// Montgomery's trick: prefix[i] = Z_0·…·Z_(i-1); one inversion of the
	// product, then each 1/Z_i walking back.
	var prefix [128]field.Element
	var acc field.Element
	acc.One()
	for i := range 128 {
		prefix[i] = acc
		acc.Multiply(&acc, &pts[i/8][i%8].Z)
	}
	if acc.Equal(new(field.Element).Zero()) == 1 {
		return nil // unreachable: the formulas never give Z = 0
	}
	acc.Invert(&acc) // 1 / (Z_0·…·Z_127)
	c := new(combTable)
	var zinv field.Element
	for i := 127; i >= 0; i-- {
		q := &pts[i/8][i%8]
		zinv.Multiply(&acc, &prefix[i]) // 1 / Z_i
		acc.Multiply(&acc, &q.Z)        // 1 / (Z_0·…·Z_(i-1))
		n := &c[i/8][i%8]
		n.YplusX.Add(&q.Y, &q.X)
		n.YplusX.Multiply(&n.YplusX, &zinv)
		n.YminusX.Subtract(&q.Y, &q.X)
		n.YminusX.Multiply(&n.YminusX, &zinv)
		n.T2d.Multiply(&q.T, d2)
		n.T2d.Multiply(&n.T2d, &zinv)
	}
	return c
}

// mult returns X25519(e, u) for the u the table was built for, in
// constant time.
//
// X25519 clamps e and multiplies by the whole clamped integer k, which is
// not reduced modulo the group order: P may have a small-order part, and
// k, a multiple of 8, is what removes it. So k is recoded as it stands
// into 64 signed digits, k = Σ k_i·16^i with -8 <= k_i <= 8, and, with
// i = 4t + g,
//
//	k·P = Σ_g 16^g · Σ_t k_(4t+g) · 2^(16t)·P,
//
// four passes of 16 table additions, the last first, with four doublings
// between passes: 64 additions and 12 doublings. The result's
// u-coordinate is (1 + y) / (1 - y) = (Z + Y) / (Z - Y); the identity
// gives 0, as the ladder does.
func (c *combTable) mult(e *[32]byte) [32]byte {
	k := *e
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64
	digits := signedRadix16(&k)

	var v extPoint
	var n nielsPoint
	var cp completedPoint
	var pp projPoint
	v.identity()
	for g := 3; g >= 0; g-- {
		if g != 3 {
			pp.fromExt(&v)
			pp.fromCompleted(cp.double(&pp))
			pp.fromCompleted(cp.double(&pp))
			pp.fromCompleted(cp.double(&pp))
			v.fromCompleted(cp.double(&pp))
		}
		for t := range 16 {
			c.lookup(&n, t, digits[4*t+g])
			v.fromCompleted(cp.addNiels(&v, &n))
		}
	}

	var num, den, u field.Element
	num.Add(&v.Z, &v.Y)
	den.Subtract(&v.Z, &v.Y)
	u.Multiply(&num, den.Invert(&den))
	var out [32]byte
	copy(out[:], u.Bytes())
	return out
}

// signedRadix16 recodes k, k[31] <= 127, into digits k_i, -8 <= k_i <= 8,
// with k = Σ k_i·16^i. As edwards25519's Scalar.signedRadix16, on the
// integer as it is.
func signedRadix16(k *[32]byte) [64]int8 {
	var digits [64]int8
	for i := range 32 {
		digits[2*i] = int8(k[i] & 15)
		digits[2*i+1] = int8(k[i] >> 4 & 15)
	}
	// Recenter: a digit of 8 or more borrows 16 from the next one. The top
	// digit is at most 7 + 1, as k < 2^255.
	for i := range 63 {
		carry := (digits[i] + 8) >> 4
		digits[i] -= carry << 4
		digits[i+1] += carry
	}
	return digits
}
