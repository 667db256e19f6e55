package lhcb

// Checksum returns the MDF record checksum of b: Bob Jenkins' one-at-a-time
// hash as LHCb computes it (LHCb::hash32Checksum), i.e. with each byte taken
// as a SIGNED char, so bytes >= 0x80 add a negative value. Unsigned bytes
// give different values; the signed form is the one that matches the sample
// files. An MDF record's checksum covers its bytes [16, size).
func Checksum(b []byte) uint32 {
	var h uint32
	for _, c := range b {
		// int8 -> uint32 sign-extends, as the C++ `hash += *k` does on a signed char.
		h += uint32(int8(c))
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}
