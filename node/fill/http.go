package fill

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// httpSource asks an HTTP endpoint for the current state: GET url answers
// 200 with a Document.
type httpSource struct {
	url string
	cli *http.Client
}

// maxDocument bounds what a source may answer (a Document is ~200 bytes).
const maxDocument = 64 << 10

// NewHTTP is a source that GETs url (http or https) for a Document, each
// request bounded by timeout.
func NewHTTP(url string, timeout time.Duration) Source {
	return &httpSource{url: url, cli: &http.Client{Timeout: timeout}}
}

func (h *httpSource) State(ctx context.Context, _ time.Time) (State, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return State{}, fmt.Errorf("%w %s: %w", ErrSource, h.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.cli.Do(req)
	if err != nil {
		return State{}, fmt.Errorf("%w %s: %w", ErrSource, h.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	switch {
	case err != nil:
		return State{}, fmt.Errorf("%w %s: %w", ErrSource, h.url, err)
	case resp.StatusCode != http.StatusOK:
		return State{}, fmt.Errorf("%w %s: HTTP %s", ErrSource, h.url, resp.Status)
	case len(b) > maxDocument:
		return State{}, fmt.Errorf("%w %s: answer longer than %d bytes", ErrSource, h.url, maxDocument)
	}
	st, err := parseDocument(b)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", h.url, err)
	}
	return st, nil
}

func (h *httpSource) Describe() string { return "http " + h.url }
func (h *httpSource) Close() error     { h.cli.CloseIdleConnections(); return nil }
