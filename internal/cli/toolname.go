package cli

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
