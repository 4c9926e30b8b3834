/*
 * Reading /proc/PID/stat lines: the fields the sampler needs, counted after
 * the comm's closing ')' (a comm may hold spaces and parentheses). Compiled
 * as one program with sampler.c, after it (sampler.rs's SOURCE), which
 * includes the headers and declares these.
 */

/* Field 6 of a stat line (the session), counted after the comm's ')'. */
static long session_of(const char *stat)
{
	const char *p = strrchr(stat, ')');
	if (!p)
		return -1;
	p++;
	for (int field = 0; field < 4; field++) {
		while (*p == ' ')
			p++;
		if (field == 3)
			break;
		while (*p && *p != ' ')
			p++;
	}
	char *end;
	long v = strtol(p, &end, 10);
	return end == p ? -1 : v;
}

/* Field 20 of a stat line (num_threads); 0 if it does not read. */
static long num_threads(const char *stat)
{
	const char *p = strrchr(stat, ')');
	if (!p)
		return 0;
	p++;
	/* After the comm, field n is the (n - 2)th word: field 20 the 18th. */
	for (int word = 0; word < 17; word++) {
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')
			p++;
	}
	char *end;
	long v = strtol(p, &end, 10);
	return end == p ? 0 : v;
}

/* The length of a stat line through field 39 (the 37th word after the
 * comm), without its trailing whitespace. */
static size_t through_processor(const char *stat, size_t n)
{
	while (n && (stat[n - 1] == '\n' || stat[n - 1] == ' '))
		n--;
	const char *close = NULL;
	for (size_t i = n; i-- > 0;)
		if (stat[i] == ')') {
			close = stat + i;
			break;
		}
	if (!close)
		return n;
	int words = 0, in_word = 0;
	for (size_t i = (size_t)(close - stat) + 1; i < n; i++) {
		int space = stat[i] == ' ';
		if (!space && !in_word)
			words++;
		if (space && in_word && words == 37)
			return i;
		in_word = !space;
	}
	return n;
}
