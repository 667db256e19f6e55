package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/sluice-daq/sluice/node/transport"
)

// Stream sends readout datagrams to a UDP input, numbering them as it is
// told: what the emulator's Sender uses.
type Stream struct {
	conn *net.UDPConn
	buf  []byte
	// refused counts sends the kernel refused because nothing listened
	// (ICMP port unreachable): those datagrams are lost.
	refused int
}

// Dial prepares to send to addr (HOST:PORT) with an SO_SNDBUF of
// socketBuffer bytes (0: system default).
func Dial(addr string, socketBuffer int) (*Stream, error) {
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("readout udp://%s: %w", addr, err)
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		return nil, fmt.Errorf("readout udp://%s: %w", addr, err)
	}
	if socketBuffer > 0 {
		c.SetWriteBuffer(socketBuffer)
	}
	return &Stream{conn: c, buf: make([]byte, 0, seqSize+MaxDatagram)}, nil
}

// Send sends one datagram: seq, then payload (an MFP, or a VDIF frame for
// VTP). Errors: transport.ErrPacketTooLarge, or the socket's error.
func (s *Stream) Send(seq uint64, payload []byte) error {
	if seqSize+len(payload) > MaxDatagram {
		return fmt.Errorf("readout udp://%s: %w: %d bytes, a datagram holds %d", s.conn.RemoteAddr(), transport.ErrPacketTooLarge, len(payload), MaxDatagram-seqSize)
	}
	s.buf = binary.LittleEndian.AppendUint64(s.buf[:0], seq)
	s.buf = append(s.buf, payload...)
	_, err := s.conn.Write(s.buf)
	if errors.Is(err, unix.ECONNREFUSED) {
		s.refused++
		return nil
	}
	return err
}

// End sends the end marker (three times: it may be lost like any
// datagram) saying that sequence numbers below count were used.
func (s *Stream) End(count uint64) error {
	var m [seqSize]byte
	binary.LittleEndian.PutUint64(m[:], count)
	for range 3 {
		if _, err := s.conn.Write(m[:]); err != nil && !errors.Is(err, unix.ECONNREFUSED) {
			return err
		}
	}
	return nil
}

// Refused is the number of datagrams refused because nothing listened.
func (s *Stream) Refused() int { return s.refused }

// Close closes the socket.
func (s *Stream) Close() error { return s.conn.Close() }
