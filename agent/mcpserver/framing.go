package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MaxRequestLine bounds one line (one JSON-RPC message) the server reads
// from its client. A longer line is answered with an Invalid Request
// error and skipped; the server goes on.
const MaxRequestLine = 16 << 20

// requestFilter stands in front of the SDK's reader of a stdio
// connection. The SDK ends the whole connection on one line it can not
// decode; JSON-RPC 2.0 wants an error response and the server going on.
// So every line is checked here first: a line that is not JSON is
// answered with a Parse error (-32700), JSON that is not one JSON-RPC 2.0
// message (a batch, an empty array, a wrong "jsonrpc" version, an id that
// is neither a string nor a number, a line past MaxRequestLine) with an
// Invalid Request error (-32600), written through out between the SDK's
// own lines; only good lines reach the SDK.
type requestFilter struct {
	src     io.ReadCloser
	in      *bufio.Reader
	out     io.Writer
	log     *slog.Logger
	max     int
	pending []byte
}

func newRequestFilter(src io.ReadCloser, out io.Writer, log *slog.Logger, max int) *requestFilter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &requestFilter{src: src, in: bufio.NewReaderSize(src, 64<<10), out: out, log: log, max: max}
}

// Read returns the next good lines.
func (f *requestFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, err := f.next()
		if len(line) > 0 {
			f.pending = append(line, '\n')
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *requestFilter) Close() error { return f.src.Close() }

// next reads one line and returns it when it is a good message; a bad
// one is answered and nil returned. err is the reader's (io.EOF at the
// end).
func (f *requestFilter) next() ([]byte, error) {
	var buf []byte
	size := 0
	for {
		chunk, err := f.in.ReadSlice('\n')
		size += len(chunk)
		if size <= f.max {
			buf = append(buf, chunk...)
		} else {
			buf = nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size > f.max {
			f.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a line of %d bytes, at most %d: nothing was done; send large content as a file path", size, f.max))
			return nil, err
		}
		return f.check(bytes.TrimSpace(buf)), err
	}
}

// check returns line when it is one JSON-RPC 2.0 message, else answers
// it and returns nil.
func (f *requestFilter) check(line []byte) []byte {
	if len(line) == 0 {
		return nil
	}
	if !json.Valid(line) {
		f.reply(nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON")
		return nil
	}
	if line[0] != '{' {
		f.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: send one JSON-RPC 2.0 message object per line (batches are not supported)")
		return nil
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		f.reply(requestID(line), jsonrpc.CodeInvalidRequest, "Invalid Request: "+cleanLine(err.Error()))
		return nil
	}
	return line
}

// requestID is the id of a bad message, when it has a valid one, for its
// error response; else null.
func requestID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(m.ID, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// reply writes an error response with id (null when nil).
func (f *requestFilter) reply(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	f.log.Warn("mcp: bad request line answered", "code", code, "error", msg)
	if _, err := f.out.Write(append(b, '\n')); err != nil {
		f.log.Warn("mcp: write error response", "err", err)
	}
}
