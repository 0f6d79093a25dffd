package team

// FullReads returns how many claims of s read the whole team.
func (s *Service) FullReads() int64 { return s.fullReads.Load() }
