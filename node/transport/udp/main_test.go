package udp

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

func TestMain(m *testing.M) {
	transporttest.MaybeChild(benchChild)
	os.Exit(m.Run())
}

// benchChild sends datagrams to the input and, for the baseline, the same
// datagrams through a second Stream to a plain socket; args: "udp", the
// input's address, the plain socket's, the datagram payload size. The verb
// is the rate in datagrams/s, prefixed "b:" for the baseline.
func benchChild(args []string) (func(string, int) error, func(), error) {
	size, _ := strconv.Atoi(args[3])
	s, err := Dial(args[1], 4<<20)
	if err != nil {
		return nil, nil, err
	}
	plain, err := Dial(args[2], 4<<20)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	pkt := transporttest.MFP(0, size)
	var seq, plainSeq uint64
	// Bursts every 500 µs, at rate on average.
	return func(verb string, n int) error {
		to, next := s, &seq
		if r, ok := strings.CutPrefix(verb, "b:"); ok {
			to, next, verb = plain, &plainSeq, r
		}
		rate, _ := strconv.ParseFloat(verb, 64)
		t0 := time.Now()
		for i := 0; i < n; {
			due := int(time.Since(t0).Seconds()*rate) + 1
			for ; i < min(due, n); i++ {
				if err := to.Send(*next, pkt); err != nil {
					return err
				}
				*next++
			}
			if i < n {
				time.Sleep(500 * time.Microsecond)
			}
		}
		return nil
	}, func() { s.Close(); plain.Close() }, nil
}
