package udp

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

func TestMain(m *testing.M) {
	transporttest.MaybeChild(benchChild)
	os.Exit(m.Run())
}

// benchChild sends datagrams to the input; args: "udp", the input's
// address, the datagram payload size. The verb is the rate.
func benchChild(args []string) (func(string, int) error, func(), error) {
	size, _ := strconv.Atoi(args[2])
	s, err := Dial(args[1], 4<<20)
	if err != nil {
		return nil, nil, err
	}
	pkt := transporttest.MFP(0, size)
	var seq uint64
	// verb is the rate in datagrams/s: bursts every 500 µs.
	return func(verb string, n int) error {
		rate, _ := strconv.ParseFloat(verb, 64)
		t0 := time.Now()
		for i := 0; i < n; {
			due := int(time.Since(t0).Seconds()*rate) + 1
			for ; i < min(due, n); i++ {
				if err := s.Send(seq, pkt); err != nil {
					return err
				}
				seq++
			}
			if i < n {
				time.Sleep(500 * time.Microsecond)
			}
		}
		return nil
	}, func() { s.Close() }, nil
}
