package ui

import (
	"net"
	"net/http"
	"strings"
)

// hostOK reports whether a request's Host header names this server, so
// that a page of another site whose name was pointed at this address
// (DNS rebinding) is refused before it reaches the token or the API. It
// accepts an IP address (a rebinding needs a name the attacker owns),
// "localhost" and the names under it, and the names of Config.Hosts,
// with any port.
func (s *Server) hostOK(hostport string) bool {
	if hostport == "" {
		return true // HTTP/1.0 without Host: not a browser
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, h := range s.cfg.Hosts {
		if strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}

func misdirected(w http.ResponseWriter) {
	http.Error(w, "421 misdirected request: this Host is not the address of this view; open the URL `teambus ui` printed (a name of its own is allowed with `teambus ui --allow-host NAME`)", http.StatusMisdirectedRequest)
}
