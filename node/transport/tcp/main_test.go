package tcp

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-daq/sluice/node/internal/transporttest"
)

func TestMain(m *testing.M) {
	transporttest.MaybeChild(benchChild)
	// The input's INFO records (a stream accepted) would go between a
	// benchmark's name and its figures on the same line, which make bench
	// parses; the tests that check records give the input their own logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

const benchPacket = 64 << 10 // bytes per packet in the benchmarks

// benchChild sends from 4 Streams to the input and 4 plain connections to
// the baseline's listener; args: "tcp", input address, plain address,
// socket buffer. Verb "s" sends n packets on the Streams, "b" n packets'
// bytes on the plain connections.
func benchChild(args []string) (func(string, int) error, func(), error) {
	ctx := context.Background()
	sobuf, _ := strconv.Atoi(args[3])
	var senders []*Stream
	var raws []net.Conn
	var pkts [][]byte
	for i := range 4 {
		s, err := Dial(ctx, args[1], sobuf)
		if err != nil {
			return nil, nil, err
		}
		senders = append(senders, s)
		c, err := net.Dial("tcp", args[2])
		if err != nil {
			return nil, nil, err
		}
		c.(*net.TCPConn).SetWriteBuffer(sobuf)
		raws = append(raws, c)
		pkts = append(pkts, transporttest.MFP(uint32(i), benchPacket))
	}
	raw := make([]byte, benchPacket)
	events := make([]uint64, 4) // next event id per sender: events complete across the 4 sources
	return func(verb string, n int) error {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range 4 {
			k := n/4 + btoi(i < n%4)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range k {
					if verb == "s" {
						binary.LittleEndian.PutUint64(pkts[i][16:], events[i]) // first_event_id
						events[i]++
						errs[i] = senders[i].Send(ctx, pkts[i])
					} else {
						_, errs[i] = raws[i].Write(raw)
					}
					if errs[i] != nil {
						return
					}
				}
				if verb == "s" {
					errs[i] = senders[i].Flush()
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}, nil, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
