/*
 * The XML tree of NCCL's topology format: a small parser (elements, attributes, comments,
 * declarations, the five named entities and numeric references; no DTDs, no CDATA, text content
 * ignored because the format has none) and a writer whose output NCCL's own loader reads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo.h"

/* Deep nesting cannot be a topology (sysfs chains are a dozen deep); the bound keeps the
 * recursive writer and free safe against hostile input. */
#define XML_MAX_DEPTH 64

static ncclResult_t xml_strdup(const char* s, size_t n, char** out_p) {
  char* d;
  CHECK(mem_calloc((void**)&d, n + 1, 1));
  memcpy(d, s, n);
  d[n] = '\0';
  *out_p = d;
  return ncclSuccess;
}

ncclResult_t topo_xml_new(const char* name, topo_xml_node_t** node_p) {
  topo_xml_node_t* n;
  CHECK(MEM_CALLOC(&n, 1));
  ncclResult_t res = xml_strdup(name, strlen(name), &n->name);
  if (res != ncclSuccess) {
    free(n);
    return res;
  }
  *node_p = n;
  return ncclSuccess;
}

void topo_xml_free(topo_xml_node_t* node) {
  if (node == NULL) return;
  for (int i = 0; i < node->nchildren; i++) topo_xml_free(node->children[i]);
  for (int i = 0; i < node->nattrs; i++) {
    free(node->attrs[i].name);
    free(node->attrs[i].value);
  }
  free(node->children);
  free(node->attrs);
  free(node->name);
  free(node);
}

static ncclResult_t xml_append_child(topo_xml_node_t* parent, topo_xml_node_t* child) {
  topo_xml_node_t** c = realloc(parent->children, sizeof(*c) * (size_t)(parent->nchildren + 1));
  if (c == NULL) {
    WARN("out of host memory adding <%s> to <%s>", child->name, parent->name);
    return ncclSystemError;
  }
  parent->children = c;
  c[parent->nchildren++] = child;
  child->parent = parent;
  return ncclSuccess;
}

ncclResult_t topo_xml_add_child(topo_xml_node_t* parent, const char* name,
                                topo_xml_node_t** child_p) {
  topo_xml_node_t* c;
  CHECK(topo_xml_new(name, &c));
  ncclResult_t res = xml_append_child(parent, c);
  if (res != ncclSuccess) {
    topo_xml_free(c);
    return res;
  }
  *child_p = c;
  return ncclSuccess;
}

void topo_xml_remove(topo_xml_node_t* child) {
  topo_xml_node_t* p = child->parent;
  if (p != NULL) {
    for (int i = 0; i < p->nchildren; i++) {
      if (p->children[i] != child) continue;
      memmove(p->children + i, p->children + i + 1,
              sizeof(*p->children) * (size_t)(p->nchildren - i - 1));
      p->nchildren--;
      break;
    }
  }
  topo_xml_free(child);
}

ncclResult_t topo_xml_copy(const topo_xml_node_t* node, topo_xml_node_t** copy_p) {
  topo_xml_node_t* c;
  ncclResult_t res;
  CHECK(topo_xml_new(node->name, &c));
  c->line = node->line;
  for (int i = 0; i < node->nattrs; i++)
    CHECK_GOTO(topo_xml_set(c, node->attrs[i].name, node->attrs[i].value), res, fail);
  for (int i = 0; i < node->nchildren; i++) {
    topo_xml_node_t* cc;
    CHECK_GOTO(topo_xml_copy(node->children[i], &cc), res, fail);
    res = xml_append_child(c, cc);
    if (res != ncclSuccess) {
      topo_xml_free(cc);
      goto fail;
    }
  }
  *copy_p = c;
  return ncclSuccess;
fail:
  topo_xml_free(c);
  return res;
}

const char* topo_xml_get(const topo_xml_node_t* node, const char* name) {
  for (int i = 0; i < node->nattrs; i++)
    if (strcmp(node->attrs[i].name, name) == 0) return node->attrs[i].value;
  return NULL;
}

int64_t topo_xml_get_int(const topo_xml_node_t* node, const char* name, int64_t def) {
  const char* v = topo_xml_get(node, name);
  if (v == NULL || *v == '\0') return def;
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 0);
  if (errno != 0 || end == v) {
    /* Hex above INT64_MAX (a guid) still reads as its bit pattern. */
    errno = 0;
    unsigned long long u = strtoull(v, &end, 0);
    if (errno != 0 || end == v) return def;
    x = (long long)u;
  }
  while (*end == ' ') end++;
  return *end == '\0' ? (int64_t)x : def;
}

ncclResult_t topo_xml_set(topo_xml_node_t* node, const char* name, const char* value) {
  char* v;
  CHECK(xml_strdup(value, strlen(value), &v));
  for (int i = 0; i < node->nattrs; i++) {
    if (strcmp(node->attrs[i].name, name) == 0) {
      free(node->attrs[i].value);
      node->attrs[i].value = v;
      return ncclSuccess;
    }
  }
  char* n;
  ncclResult_t res = xml_strdup(name, strlen(name), &n);
  if (res != ncclSuccess) {
    free(v);
    return res;
  }
  topo_xml_attr_t* a = realloc(node->attrs, sizeof(*a) * (size_t)(node->nattrs + 1));
  if (a == NULL) {
    free(v);
    free(n);
    WARN("out of host memory setting %s on <%s>", name, node->name);
    return ncclSystemError;
  }
  node->attrs = a;
  a[node->nattrs].name = n;
  a[node->nattrs].value = v;
  node->nattrs++;
  return ncclSuccess;
}

ncclResult_t topo_xml_set_int(topo_xml_node_t* node, const char* name, int64_t value) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%lld", (long long)value);
  return topo_xml_set(node, name, buf);
}

ncclResult_t topo_xml_set_default(topo_xml_node_t* node, const char* name, const char* value) {
  if (topo_xml_get(node, name) != NULL) return ncclSuccess;
  return topo_xml_set(node, name, value);
}

static bool xml_matches(const topo_xml_node_t* n, const char* name, const char* attr,
                        const char* value) {
  if (strcmp(n->name, name) != 0) return false;
  if (attr == NULL) return true;
  const char* v = topo_xml_get(n, attr);
  return v != NULL && value != NULL && strcmp(v, value) == 0;
}

topo_xml_node_t* topo_xml_find_child(const topo_xml_node_t* parent, const char* name,
                                     const char* attr, const char* value) {
  for (int i = 0; i < parent->nchildren; i++)
    if (xml_matches(parent->children[i], name, attr, value)) return parent->children[i];
  return NULL;
}

topo_xml_node_t* topo_xml_find(const topo_xml_node_t* root, const char* name, const char* attr,
                               const char* value) {
  if (xml_matches(root, name, attr, value)) return (topo_xml_node_t*)root;
  for (int i = 0; i < root->nchildren; i++) {
    topo_xml_node_t* f = topo_xml_find(root->children[i], name, attr, value);
    if (f != NULL) return f;
  }
  return NULL;
}

bool topo_xml_equal(const topo_xml_node_t* a, const topo_xml_node_t* b) {
  if (strcmp(a->name, b->name) != 0 || a->nattrs != b->nattrs || a->nchildren != b->nchildren)
    return false;
  for (int i = 0; i < a->nattrs; i++) {
    if (strcmp(a->attrs[i].name, b->attrs[i].name) != 0) return false;
    if (strcmp(a->attrs[i].value, b->attrs[i].value) != 0) return false;
  }
  for (int i = 0; i < a->nchildren; i++)
    if (!topo_xml_equal(a->children[i], b->children[i])) return false;
  return true;
}

/* ---- Parser -------------------------------------------------------------------------------- */

typedef struct {
  const char* s;
  size_t len;
  size_t pos;
  int line;
  const char* source;
} xml_parser_t;

#define XML_FAIL(p, ...)                                                    \
  do {                                                                      \
    char msg_[160];                                                         \
    snprintf(msg_, sizeof(msg_), __VA_ARGS__);                              \
    WARN("topology XML %s:%d: %s", (p)->source, (p)->line, msg_);           \
    return ncclInvalidArgument;                                             \
  } while (0)

static int xml_peek(const xml_parser_t* p) {
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static void xml_advance(xml_parser_t* p, size_t n) {
  for (size_t i = 0; i < n && p->pos < p->len; i++) {
    if (p->s[p->pos] == '\n') p->line++;
    p->pos++;
  }
}

static bool xml_starts(const xml_parser_t* p, const char* lit) {
  size_t n = strlen(lit);
  return p->len - p->pos >= n && memcmp(p->s + p->pos, lit, n) == 0;
}

static void xml_skip_space(xml_parser_t* p) {
  int c;
  while ((c = xml_peek(p)) == ' ' || c == '\t' || c == '\n' || c == '\r') xml_advance(p, 1);
}

static bool xml_name_char(int c, bool first) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':') return true;
  return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
}

static ncclResult_t xml_parse_name(xml_parser_t* p, const char* what, char** name_p) {
  size_t start = p->pos;
  if (!xml_name_char(xml_peek(p), true)) {
    int c = xml_peek(p);
    if (c < 0) XML_FAIL(p, "unexpected end of input, expected %s", what);
    XML_FAIL(p, "expected %s, found '%c'", what, c);
  }
  while (xml_name_char(xml_peek(p), false)) xml_advance(p, 1);
  return xml_strdup(p->s + start, p->pos - start, name_p);
}

/* Skip <!-- ... -->, <? ... ?> and <!DOCTYPE ...>; *skipped_p 1 when one was there. */
static ncclResult_t xml_skip_misc(xml_parser_t* p, bool* skipped_p) {
  *skipped_p = false;
  const char* end = NULL;
  if (xml_starts(p, "<!--")) end = "-->";
  else if (xml_starts(p, "<?")) end = "?>";
  else if (xml_starts(p, "<!")) end = ">";
  if (end == NULL) return ncclSuccess;
  int line = p->line;
  while (p->pos < p->len && !xml_starts(p, end)) xml_advance(p, 1);
  if (p->pos >= p->len) {
    p->line = line;
    XML_FAIL(p, "comment or declaration never closed (missing \"%s\")", end);
  }
  xml_advance(p, strlen(end));
  *skipped_p = true;
  return ncclSuccess;
}

/* Append one decoded character (code point) in UTF-8. */
static size_t xml_put_utf8(char* out, unsigned long cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static ncclResult_t xml_parse_value(xml_parser_t* p, const char* attr, char** value_p) {
  int quote = xml_peek(p);
  if (quote != '"' && quote != '\'') XML_FAIL(p, "value of attribute %s must be quoted", attr);
  xml_advance(p, 1);
  size_t start = p->pos;
  while (p->pos < p->len && p->s[p->pos] != quote) {
    if (p->s[p->pos] == '<') XML_FAIL(p, "'<' inside the value of attribute %s", attr);
    xml_advance(p, 1);
  }
  if (p->pos >= p->len) XML_FAIL(p, "value of attribute %s never closed", attr);
  size_t n = p->pos - start;
  xml_advance(p, 1);
  /* Decoding only shrinks the text (the longest expansion, 4 UTF-8 bytes, comes from at least
   * "&#65536;"), so n + 1 bytes always suffice. */
  char* out;
  CHECK(mem_calloc((void**)&out, n + 1, 1));
  size_t o = 0;
  const char* s = p->s + start;
  for (size_t i = 0; i < n;) {
    if (s[i] != '&') {
      out[o++] = s[i++];
      continue;
    }
    const char* semi = memchr(s + i, ';', n - i);
    size_t elen = semi ? (size_t)(semi - (s + i)) + 1 : 0;
    static const struct {
      const char* ent;
      char c;
    } named[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool done = false;
    for (size_t k = 0; k < sizeof(named) / sizeof(named[0]) && !done; k++) {
      if (elen == strlen(named[k].ent) && memcmp(s + i, named[k].ent, elen) == 0) {
        out[o++] = named[k].c;
        i += elen;
        done = true;
      }
    }
    if (!done && elen > 3 && s[i + 1] == '#') {
      char num[16];
      if (elen - 3 < sizeof(num)) {
        memcpy(num, s + i + 2, elen - 3);
        num[elen - 3] = '\0';
        char* end;
        bool hex = num[0] == 'x' || num[0] == 'X';
        unsigned long cp = strtoul(num + (hex ? 1 : 0), &end, hex ? 16 : 10);
        if (*end == '\0' && end != num + (hex ? 1 : 0) && cp > 0 && cp <= 0x10FFFF) {
          o += xml_put_utf8(out + o, cp);
          i += elen;
          done = true;
        }
      }
    }
    if (!done) {
      free(out);
      XML_FAIL(p, "bad entity in the value of attribute %s (use &amp; for '&')", attr);
    }
  }
  out[o] = '\0';
  *value_p = out;
  return ncclSuccess;
}

static ncclResult_t xml_parse_element(xml_parser_t* p, int depth, topo_xml_node_t** node_p);

/* Children and end tag of `node`, whose start tag has been read. */
static ncclResult_t xml_parse_content(xml_parser_t* p, int depth, topo_xml_node_t* node) {
  int start_line = node->line;
  for (;;) {
    /* Text content has no meaning in this format: skip it up to the next tag. */
    while (p->pos < p->len && p->s[p->pos] != '<') xml_advance(p, 1);
    if (p->pos >= p->len) {
      p->line = start_line;
      XML_FAIL(p, "element <%s> is never closed (missing </%s>)", node->name, node->name);
    }
    bool skipped;
    CHECK(xml_skip_misc(p, &skipped));
    if (skipped) continue;
    if (xml_starts(p, "</")) {
      xml_advance(p, 2);
      char* name;
      CHECK(xml_parse_name(p, "an element name after '</'", &name));
      bool same = strcmp(name, node->name) == 0;
      if (!same) {
        char buf[64];
        sys_strlcpy(buf, name, sizeof(buf));
        free(name);
        XML_FAIL(p, "</%s> closes <%s> opened at line %d", buf, node->name, start_line);
      }
      free(name);
      xml_skip_space(p);
      if (xml_peek(p) != '>') XML_FAIL(p, "expected '>' to end </%s>", node->name);
      xml_advance(p, 1);
      return ncclSuccess;
    }
    topo_xml_node_t* child;
    CHECK(xml_parse_element(p, depth + 1, &child));
    ncclResult_t res = xml_append_child(node, child);
    if (res != ncclSuccess) {
      topo_xml_free(child);
      return res;
    }
  }
}

static ncclResult_t xml_parse_element(xml_parser_t* p, int depth, topo_xml_node_t** node_p) {
  if (depth > XML_MAX_DEPTH) XML_FAIL(p, "elements nested deeper than %d", XML_MAX_DEPTH);
  if (xml_peek(p) != '<') XML_FAIL(p, "expected '<'");
  xml_advance(p, 1);
  topo_xml_node_t* node;
  CHECK(MEM_CALLOC(&node, 1));
  node->line = p->line;
  ncclResult_t res;
  CHECK_GOTO(xml_parse_name(p, "an element name after '<'", &node->name), res, fail);
  for (;;) {
    int c0 = xml_peek(p);
    xml_skip_space(p);
    int c = xml_peek(p);
    if (c == '/') {
      xml_advance(p, 1);
      if (xml_peek(p) != '>') {
        res = ncclInvalidArgument;
        WARN("topology XML %s:%d: expected '>' after '/' in <%s>", p->source, p->line,
             node->name);
        goto fail;
      }
      xml_advance(p, 1);
      *node_p = node;
      return ncclSuccess;
    }
    if (c == '>') {
      xml_advance(p, 1);
      CHECK_GOTO(xml_parse_content(p, depth, node), res, fail);
      *node_p = node;
      return ncclSuccess;
    }
    if (c < 0) {
      res = ncclInvalidArgument;
      WARN("topology XML %s:%d: unexpected end of input inside the tag <%s>", p->source, p->line,
           node->name);
      goto fail;
    }
    if (c0 != ' ' && c0 != '\t' && c0 != '\n' && c0 != '\r') {
      res = ncclInvalidArgument;
      WARN("topology XML %s:%d: expected a space before the next attribute of <%s>, found '%c'",
           p->source, p->line, node->name, c);
      goto fail;
    }
    char* aname = NULL;
    char* avalue = NULL;
    CHECK_GOTO(xml_parse_name(p, "an attribute name", &aname), res, fail);
    xml_skip_space(p);
    if (xml_peek(p) != '=') {
      WARN("topology XML %s:%d: attribute %s of <%s> has no '=value'", p->source, p->line, aname,
           node->name);
      free(aname);
      res = ncclInvalidArgument;
      goto fail;
    }
    xml_advance(p, 1);
    xml_skip_space(p);
    res = xml_parse_value(p, aname, &avalue);
    if (res == ncclSuccess && topo_xml_get(node, aname) != NULL) {
      WARN("topology XML %s:%d: attribute %s appears twice in <%s>", p->source, p->line, aname,
           node->name);
      res = ncclInvalidArgument;
    }
    if (res == ncclSuccess) res = topo_xml_set(node, aname, avalue);
    free(aname);
    free(avalue);
    if (res != ncclSuccess) goto fail;
  }
fail:
  topo_xml_free(node);
  return res;
}

ncclResult_t topo_xml_parse(const char* text, size_t len, const char* source,
                            topo_xml_node_t** root_p) {
  xml_parser_t p = {.s = text, .len = len, .pos = 0, .line = 1, .source = source};
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.pos = 3; /* UTF-8 byte-order mark */
  if (memchr(text, '\0', len) != NULL) {
    const char* z = memchr(text, '\0', len);
    for (const char* c = text; c < z; c++)
      if (*c == '\n') p.line++;
    XML_FAIL(&p, "NUL byte in the input (not a text file?)");
  }
  topo_xml_node_t* root = NULL;
  for (;;) {
    xml_skip_space(&p);
    if (p.pos >= p.len) break;
    bool skipped;
    ncclResult_t res = xml_skip_misc(&p, &skipped);
    if (res != ncclSuccess) {
      topo_xml_free(root);
      return res;
    }
    if (skipped) continue;
    if (root != NULL) {
      topo_xml_free(root);
      XML_FAIL(&p, "content after the end of the root element");
    }
    if (xml_peek(&p) != '<') XML_FAIL(&p, "text before the root element");
    CHECK(xml_parse_element(&p, 0, &root));
  }
  if (root == NULL) XML_FAIL(&p, "no element in the input (empty file?)");
  *root_p = root;
  return ncclSuccess;
}

ncclResult_t topo_xml_load(const char* path, topo_xml_node_t** root_p) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    WARN("cannot open topology file %s: %m (check NCCL_TOPO_FILE)", path);
    return ncclSystemError;
  }
  size_t cap = 1 << 16, len = 0;
  char* buf = malloc(cap);
  ncclResult_t res = ncclSuccess;
  while (buf != NULL) {
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (len < cap) break;
    cap *= 2;
    char* b = realloc(buf, cap);
    if (b == NULL) {
      free(buf);
      buf = NULL;
    } else {
      buf = b;
    }
  }
  if (buf == NULL) {
    WARN("out of host memory reading topology file %s", path);
    res = ncclSystemError;
  } else if (ferror(f)) {
    WARN("error reading topology file %s: %m", path);
    res = ncclSystemError;
  }
  fclose(f);
  if (res == ncclSuccess) res = topo_xml_parse(buf, len, path, root_p);
  free(buf);
  return res;
}

/* ---- Writer -------------------------------------------------------------------------------- */

typedef struct {
  char* buf;
  size_t len;
  size_t cap;
  bool failed;
} xml_out_t;

static void out_append(xml_out_t* o, const char* s, size_t n) {
  if (o->failed) return;
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 4096;
    while (o->len + n + 1 > cap) cap *= 2;
    char* b = realloc(o->buf, cap);
    if (b == NULL) {
      o->failed = true;
      return;
    }
    o->buf = b;
    o->cap = cap;
  }
  memcpy(o->buf + o->len, s, n);
  o->len += n;
  o->buf[o->len] = '\0';
}

static void out_str(xml_out_t* o, const char* s) { out_append(o, s, strlen(s)); }

static void out_escaped(xml_out_t* o, const char* s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': out_str(o, "&lt;"); break;
      case '>': out_str(o, "&gt;"); break;
      case '&': out_str(o, "&amp;"); break;
      case '"': out_str(o, "&quot;"); break;
      case '\n': out_str(o, "&#10;"); break;
      case '\t': out_str(o, "&#9;"); break;
      case '\r': out_str(o, "&#13;"); break;
      default: out_append(o, s, 1);
    }
  }
}

static void xml_write_node(xml_out_t* o, const topo_xml_node_t* n, int depth) {
  for (int i = 0; i < depth; i++) out_str(o, "  ");
  out_str(o, "<");
  out_str(o, n->name);
  for (int i = 0; i < n->nattrs; i++) {
    out_str(o, " ");
    out_str(o, n->attrs[i].name);
    out_str(o, "=\"");
    out_escaped(o, n->attrs[i].value);
    out_str(o, "\"");
  }
  if (n->nchildren == 0) {
    out_str(o, "/>\n");
    return;
  }
  out_str(o, ">\n");
  for (int i = 0; i < n->nchildren; i++) xml_write_node(o, n->children[i], depth + 1);
  for (int i = 0; i < depth; i++) out_str(o, "  ");
  out_str(o, "</");
  out_str(o, n->name);
  out_str(o, ">\n");
}

ncclResult_t topo_xml_write(const topo_xml_node_t* root, char** text_p, size_t* len_p) {
  xml_out_t o = {0};
  xml_write_node(&o, root, 0);
  if (o.failed || o.buf == NULL) {
    free(o.buf);
    WARN("out of host memory writing the topology XML");
    return ncclSystemError;
  }
  *text_p = o.buf;
  if (len_p) *len_p = o.len;
  return ncclSuccess;
}

ncclResult_t topo_xml_dump(const topo_xml_node_t* root, const char* path) {
  char* text;
  size_t len;
  CHECK(topo_xml_write(root, &text, &len));
  size_t tlen = strlen(path) + 32;
  char* tmp = malloc(tlen);
  if (tmp == NULL) {
    free(text);
    WARN("out of host memory dumping the topology to %s", path);
    return ncclSystemError;
  }
  snprintf(tmp, tlen, "%s.tmp.%d", path, (int)getpid());
  ncclResult_t res = ncclSuccess;
  FILE* f = fopen(tmp, "wb");
  if (f == NULL) {
    WARN("cannot create %s to dump the topology: %m (check NCCL_TOPO_DUMP_FILE)", tmp);
    res = ncclSystemError;
  } else {
    bool ok = fwrite(text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
      WARN("cannot write the topology to %s: %m", tmp);
      res = ncclSystemError;
      unlink(tmp);
    } else if (rename(tmp, path) != 0) {
      WARN("cannot rename %s to %s: %m", tmp, path);
      res = ncclSystemError;
      unlink(tmp);
    }
  }
  free(tmp);
  free(text);
  return res;
}

/* ---- Bus ids --------------------------------------------------------------------------------- */

int64_t topo_busid_parse(const char* str) {
  /* "dddd:bb:dd.f" or "bb:dd.f"; NVML writes an 8-digit domain ("00000000:19:00.0"). The
   * hex digits in order form the number, which is the cuda_bus_id() layout. */
  if (str == NULL) return -1;
  int64_t v = 0;
  int colons = 0, dots = 0, digits = 0, field = 0;
  for (const char* c = str; *c; c++) {
    int d;
    if (*c >= '0' && *c <= '9') d = *c - '0';
    else if (*c >= 'a' && *c <= 'f') d = *c - 'a' + 10;
    else if (*c >= 'A' && *c <= 'F') d = *c - 'A' + 10;
    else if (*c == ':') {
      if (field == 0 || dots) return -1;
      colons++;
      field = 0;
      continue;
    } else if (*c == '.') {
      if (field == 0 || dots || colons == 0) return -1;
      dots++;
      field = 0;
      continue;
    } else {
      return -1;
    }
    if (++digits > 15) return -1;
    field++;
    v = v * 16 + d;
  }
  if (colons < 1 || colons > 2 || dots != 1 || field != 1) return -1;
  return v;
}

const char* topo_busid_str(int64_t id, char* buf, size_t size) {
  snprintf(buf, size, "%04llx:%02llx:%02llx.%llx", (unsigned long long)(id >> 20),
           (unsigned long long)((id >> 12) & 0xff), (unsigned long long)((id >> 4) & 0xff),
           (unsigned long long)(id & 0xf));
  return buf;
}
