package transport_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-daq/sluice/node/transport"
	_ "github.com/sluice-daq/sluice/node/transport/all"
	"github.com/sluice-daq/sluice/node/transport/tcp"
)

// TestParseURI: the one parser of transport URIs, for inputs and senders
// alike. Port 0 is a valid listen address (the kernel picks the port); an
// option given twice is refused, whatever its values.
func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		uri, scheme, target string
		payload             transport.Payload
	}{
		{"shm://ring0", "shm", "ring0", transport.PayloadMFP},
		{"tcp://127.0.0.1:9000", "tcp", "127.0.0.1:9000", transport.PayloadMFP},
		{"tcp://127.0.0.1:0", "tcp", "127.0.0.1:0", transport.PayloadMFP},
		{"tcp://:9000", "tcp", ":9000", transport.PayloadMFP},
		{"tcp://:9000?framing=sluice", "tcp", ":9000", transport.PayloadMFP},
		{"tcp://:9000?framing=ferol", "tcp", ":9000", transport.PayloadFEROL},
		{"udp://[::1]:0", "udp", "[::1]:0", transport.PayloadMFP},
		{"udp://127.0.0.1:9000?format=mfp", "udp", "127.0.0.1:9000", transport.PayloadMFP},
		{"udp://127.0.0.1:9000?format=vtp", "udp", "127.0.0.1:9000", transport.PayloadVDIF},
		{"file:///data/run1.mfp", "file", "/data/run1.mfp", transport.PayloadMFP},
		{"file://rel/run1.mfp", "file", "rel/run1.mfp", transport.PayloadMFP},
		{"file://./x%20y.mfp", "file", "./x%20y.mfp", transport.PayloadMFP},
	} {
		u, err := transport.ParseURI(tc.uri)
		if err != nil || u.Scheme != tc.scheme || u.Target != tc.target || transport.PayloadOf(u) != tc.payload {
			t.Errorf("ParseURI(%q) = %+v, %v; want %s %s %v", tc.uri, u, err, tc.scheme, tc.target, tc.payload)
		}
		if err == nil && u.String() != tc.uri {
			t.Errorf("ParseURI(%q).String() = %q", tc.uri, u)
		}
	}
	for bad, why := range map[string]string{
		"":                                "want shm://NAME",
		"ring0":                           "want shm://NAME",
		"://x":                            "want shm://NAME",
		"http://x:1":                      `unknown scheme "http"`,
		"shm://":                          "plain file name",
		"shm://a/b":                       "plain file name",
		"shm://..":                        "plain file name",
		"shm://r?size=1":                  `unknown option "size": shm:// takes no options`,
		"tcp://127.0.0.1":                 "want tcp://HOST:PORT",
		"tcp://127.0.0.1:http":            `port 0..65535, not "http"`,
		"tcp://host:9000/path":            "port 0..65535",
		"tcp://127.0.0.1:0?window=5":      `unknown option "window": tcp:// takes framing`,
		"tcp://127.0.0.1:0?framing=frd":   `framing "frd": want sluice or ferol`,
		"udp://:99999":                    "port 0..65535",
		"udp://1.2.3.4:5?%zz":             "options:",
		"udp://h:9?format=mdf":            `format "mdf": want mfp or vtp`,
		"udp://h:9?format=vtp&format=mfp": `option "format" given 2 times`,
		"udp://h:9?format=vtp&format=vtp": `option "format" given 2 times`,
		"udp://h:9?format=vtp&rate=1":     `unknown option "rate": udp:// takes format`,
		"file://":                         "want file://PATH",
	} {
		_, err := transport.ParseURI(bad)
		var ue *transport.URIError
		if !errors.Is(err, transport.ErrBadURI) || !errors.As(err, &ue) || ue.URI != bad || !strings.Contains(ue.Want, why) {
			t.Errorf("ParseURI(%q): %v, want a URIError saying %q", bad, err, why)
		}
	}
	// In registration order (package all), "or" before the last; a
	// transport registered later only adds to the end.
	if f := transport.Forms(); !strings.HasPrefix(f, "shm://NAME, tcp://HOST:PORT[?framing=...], udp://HOST:PORT[?format=...]") || !strings.Contains(f, "file://PATH") || !strings.Contains(f, " or ") {
		t.Errorf("Forms() = %q", f)
	}
	if f := transport.EmbeddableForms(); !strings.HasPrefix(f, "shm://NAME, tcp://HOST:PORT") || strings.Contains(f, "file://") {
		t.Errorf("EmbeddableForms() = %q", f)
	}
}

// Inputs opened but never run release their sockets on Close, twice if
// need be; a sender refuses port 0 and options of another transport.
func TestOpenAndClose(t *testing.T) {
	for _, uri := range []string{"tcp://127.0.0.1:0", "udp://127.0.0.1:0", "shm://never-attached", "file:///nonexistent"} {
		in, err := transport.OpenInput(uri, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Close(); err != nil {
			t.Errorf("%s: Close: %v", uri, err)
		}
		if err := in.Close(); err != nil {
			t.Errorf("%s: second Close: %v", uri, err)
		}
	}
	ctx := context.Background()
	for _, uri := range []string{"tcp://127.0.0.1:0", "udp://127.0.0.1:0"} {
		if _, err := transport.OpenSender(ctx, uri, nil, 1); !errors.Is(err, transport.ErrBadURI) || !strings.Contains(err.Error(), "not 0") {
			t.Errorf("sender to %s: %v, want ErrBadURI for port 0", uri, err)
		}
	}
	o := tcp.DefaultOptions()
	if _, err := transport.OpenInput("udp://127.0.0.1:0", &o); !errors.Is(err, transport.ErrOptions) {
		t.Errorf("tcp options for a udp input: %v, want ErrOptions", err)
	}
	if _, err := transport.OpenInput("ftp://x", nil); !errors.Is(err, transport.ErrBadURI) {
		t.Errorf("unknown scheme: %v", err)
	}
}

func TestRegisterRefusesMistakes(t *testing.T) {
	for name, tr := range map[string]transport.Transport{
		"duplicate scheme": tcp.Transport,
		"upper case":       {Scheme: "TCP2", NewInputOptions: tcp.Transport.NewInputOptions, OpenInput: tcp.Transport.OpenInput},
		"no end":           {Scheme: "none"},
		"half an input":    {Scheme: "half", OpenInput: tcp.Transport.OpenInput},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			transport.Register(tr)
		}()
	}
}

// FuzzParseURI: any string is parsed or refused with a URIError, never a
// panic, and a parsed URI written back (String) parses to the same URI.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"shm://ring0", "tcp://127.0.0.1:0", "udp://[::1]:9000?format=vtp", "file://./x.mfp",
		"udp://h:9?format=vtp&format=mfp", "file://a://b?c", "tcp://h:1?%zz", "shm://a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := transport.ParseURI(s)
		if err != nil {
			var ue *transport.URIError
			if !errors.As(err, &ue) || ue.URI != s {
				t.Fatalf("ParseURI(%q): %v, want a URIError", s, err)
			}
			return
		}
		again, err := transport.ParseURI(u.String())
		if err != nil || again.String() != u.String() || again.Scheme != u.Scheme || again.Target != u.Target || len(again.Query) != len(u.Query) {
			t.Fatalf("ParseURI(%q) = %+v, written back %q parses to %+v, %v", s, u, u, again, err)
		}
	})
}
