/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir.h: the Sarek IR in memory (proto/IR.md, versions 1 and 2).
 *
 * A document is decoded from its msgpack wire form by ir_decode()
 * (ir_decode.c), which validates all of it: what this header describes is
 * only ever a well-formed kernel, with every name resolved. The generator
 * (gen_hip.c) reads it.
 *
 * Everything of a document lives in one arena and is freed with it
 * (ir_doc_free). Nodes carry the path they were read at (ir_path_t), so
 * that a later phase can say where in the document a problem is.
 *
 * This module depends on nothing of the daemon but the error codes of
 * <hipd.h>: no libuv, no sessions. Not thread-safe per document; separate
 * documents may be used by separate threads.
 */
#ifndef HIPD_CODEGEN_IR_H
#define HIPD_CODEGEN_IR_H

#include <stddef.h>
#include <stdint.h>

#define IR_VERSION_MIN 1
#define IR_VERSION_MAX 2

/* ------------------------------------------------------------------ arena */

typedef struct ir_arena ir_arena_t;

/* A new arena that refuses to grow past @p cap bytes (0: no cap). */
ir_arena_t *ir_arena_new(size_t cap);
/* @p n zeroed bytes, aligned for any type; NULL when out of memory or past
 * the arena's cap. */
void *ir_alloc(ir_arena_t *a, size_t n);
/* A NUL-terminated copy of @p s[0, n), or NULL. */
char *ir_strndup(ir_arena_t *a, const char *s, size_t n);
/* Bytes allocated so far. */
size_t ir_arena_used(const ir_arena_t *a);
void ir_arena_free(ir_arena_t *a);

/* ------------------------------------------------------------------ paths */

/* Where a value sits in the document: a chain from the value up to a key
 * of the document map. A segment is a map key or a node's field name
 * (key != NULL) or a list index (key == NULL). */
typedef struct ir_path {
  const struct ir_path *up;
  const char *key; /* static or arena string */
  uint32_t index;
} ir_path_t;

/* Write the path as "kernel.body[3].then.args[1]" into @p buf (a path
 * longer than 1024 bytes keeps its first and last 500 around "..."); NULL
 * is "document". @return @p buf. */
char *ir_path_format(const ir_path_t *p, char *buf, size_t size);

#define IR_PATH_MAX 1040

/* What went wrong, where: the code (HIPD_EIR, HIPD_EINTRINSIC, HIPD_ENOMEM),
 * the path and a message that names the problem. */
typedef struct ir_error {
  int code;
  char path[IR_PATH_MAX];
  char msg[512];
} ir_error_t;

/* Set @p err (only if no error is set yet) and @return @p code. */
int ir_error_set(ir_error_t *err, int code, const ir_path_t *at,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Quote @p n bytes of @p s for a message: at most 64 of them, other than
 * printable ASCII written as \xNN. @return @p buf. */
char *ir_quote(char *buf, size_t size, const char *s, size_t n);

/* ------------------------------------------------------------- tag tables */

/* The sum types of the IR, each with its tags (the constructors), in the
 * order of the enums below. The coverage test walks these tables. */
typedef enum {
  IR_TS_MEMSPACE,
  IR_TS_ELTTYPE,
  IR_TS_CONST,
  IR_TS_BINOP,
  IR_TS_UNOP,
  IR_TS_DIR,
  IR_TS_PATTERN,
  IR_TS_EXPR,
  IR_TS_LVALUE,
  IR_TS_STMT,
  IR_TS_DECL,
  IR_TS_COOPMAT, /* version 2 */
  IR_TS__N
} ir_tagset_id_t;

typedef struct ir_tagset {
  const char *type;        /* "expr" */
  const char *const *tags; /* "const", "var", ... */
  const int8_t *arity;     /* fields after the tag; NULL for enumerations */
  unsigned n;
  const uint8_t *since; /* the IR version that added each tag; NULL: all 1 */
} ir_tagset_t;

extern const ir_tagset_t ir_tagsets[IR_TS__N];

/* ------------------------------------------------------------------ types */

typedef enum { IR_MEM_GLOBAL, IR_MEM_SHARED, IR_MEM_LOCAL, IR_MEM__N } ir_mem_t;

typedef enum {
  IR_T_I32,
  IR_T_I64,
  IR_T_F32,
  IR_T_F64,
  IR_T_F16, /* version 2: binary16 storage, __half */
  IR_T_U8,  /* version 2: unsigned char */
  IR_T_BOOL,
  IR_T_UNIT,
  IR_T_RECORD,
  IR_T_VARIANT,
  IR_T_ARRAY,
  IR_T_VEC,
  IR_T__N
} ir_tkind_t;

typedef enum {
  IR_C_I32,
  IR_C_I64,
  IR_C_F32,
  IR_C_F64,
  IR_C_BOOL,
  IR_C_UNIT,
  IR_C_F16, /* version 2 */
  IR_C_U8,  /* version 2 */
  IR_C__N
} ir_ckind_t;

typedef enum {
  IR_ADD,
  IR_SUB,
  IR_MUL,
  IR_DIV,
  IR_MOD,
  IR_EQ,
  IR_NE,
  IR_LT,
  IR_LE,
  IR_GT,
  IR_GE,
  IR_AND,
  IR_OR,
  IR_SHL,
  IR_SHR,
  IR_BAND,
  IR_BOR,
  IR_BXOR,
  IR_BINOP__N
} ir_binop_t;

typedef enum { IR_NEG, IR_NOT, IR_BNOT, IR_UNOP__N } ir_unop_t;
typedef enum { IR_UPTO, IR_DOWNTO, IR_DIR__N } ir_dir_t;
typedef enum { IR_P_CTOR, IR_P_WILD, IR_P__N } ir_pkind_t;

typedef enum {
  IR_E_CONST,
  IR_E_VAR,
  IR_E_BINOP,
  IR_E_UNOP,
  IR_E_AREAD,
  IR_E_AREADX,
  IR_E_FIELD,
  IR_E_INTRINSIC,
  IR_E_CAST,
  IR_E_TUPLE,
  IR_E_APP,
  IR_E_RECORD,
  IR_E_VARIANT,
  IR_E_ALEN,
  IR_E_ACREATE,
  IR_E_IF,
  IR_E_MATCH,
  IR_E__N
} ir_ekind_t;

typedef enum {
  IR_L_VAR,
  IR_L_AELEM,
  IR_L_AELEMX,
  IR_L_FIELD,
  IR_L__N
} ir_lkind_t;

typedef enum {
  IR_S_ASSIGN,
  IR_S_SEQ,
  IR_S_IF,
  IR_S_WHILE,
  IR_S_FOR,
  IR_S_MATCH,
  IR_S_RETURN,
  IR_S_BARRIER,
  IR_S_WARP_BARRIER,
  IR_S_EXPR,
  IR_S_EMPTY,
  IR_S_LET,
  IR_S_LETMUT,
  IR_S_PRAGMA,
  IR_S_FENCE,
  IR_S_BLOCK,
  IR_S_NATIVE,
  IR_S_COOPMAT, /* version 2 */
  IR_S__N
} ir_skind_t;

typedef enum { IR_D_PARAM, IR_D_LOCAL, IR_D_SHARED, IR_D__N } ir_dkind_t;

struct ir_record;
struct ir_variant;
struct ir_helper;
struct ir_stmt;

typedef struct ir_type {
  ir_tkind_t kind;
  const char *name;           /* record, variant: the type name */
  struct ir_record *rec;      /* record: its definition (resolved) */
  struct ir_variant *variant; /* variant: its definition (resolved) */
  struct ir_type *elt;        /* array, vec */
  ir_mem_t mem;               /* array */
  const ir_path_t *path;
} ir_type_t;

/* What declared a variable. */
typedef enum {
  IR_VK_PARAM,  /* kernel param */
  IR_VK_LOCAL,  /* kernel local decl */
  IR_VK_SHARED, /* kernel shared decl: named, no id */
  IR_VK_LET,    /* let / letmut */
  IR_VK_FOR,    /* for loop variable */
  IR_VK_BINDER, /* pattern binder */
  IR_VK_HPARAM, /* helper param */
} ir_vkind_t;

typedef struct ir_var {
  const char *name;
  uint64_t id; /* unique per function; unused for IR_VK_SHARED */
  ir_type_t *type;
  int is_mutable;
  ir_vkind_t vkind;
  int has_length; /* kernel param followed by its length */
  const ir_path_t *path;
  /* The checker's and the generator's working state. */
  int in_scope;
  struct ir_var *shadowed; /* the binding of the same name it hides */
  const char *cname;       /* the C spelling the generator chose */
  int soa;                 /* kernel param lowered as SoA */
} ir_var_t;

typedef struct ir_const {
  ir_ckind_t kind;
  int64_t i; /* i32, i64 */
  double f;  /* f32, f64 */
  int b;     /* bool */
} ir_const_t;

typedef struct ir_expr ir_expr_t;

typedef struct ir_field_init {
  const char *field;
  ir_expr_t *value;
  const ir_path_t *path;
} ir_field_init_t;

typedef struct ir_pattern {
  ir_pkind_t kind;
  const char *ctor;    /* ctor patterns */
  uint32_t nbinders;   /* 0, or the ctor's payload count */
  ir_var_t **binders;  /* NULL entries: payloads ignored */
  struct ir_ctor *def; /* resolved */
  const ir_path_t *path;
} ir_pattern_t;

typedef struct ir_ecase {
  ir_pattern_t *pat;
  ir_expr_t *body;
} ir_ecase_t;

typedef struct ir_scase {
  ir_pattern_t *pat;
  struct ir_stmt *body;
} ir_scase_t;

struct ir_expr {
  ir_ekind_t kind;
  const ir_path_t *path;
  union {
    ir_const_t c;
    struct {
      uint64_t id;
      const char *name;
      ir_var_t *decl;
    } var;
    struct {
      ir_binop_t op;
      ir_expr_t *l, *r;
    } bin;
    struct {
      ir_unop_t op;
      ir_expr_t *arg;
    } un;
    struct { /* aread, alen (index NULL) */
      const char *array;
      ir_var_t *decl;
      ir_expr_t *index;
    } aread;
    struct {
      ir_expr_t *base, *index;
    } areadx;
    struct {
      ir_expr_t *rec;
      const char *field;
    } field;
    struct {
      uint32_t npath;
      const char **path;
      const char *name;
      uint32_t nargs;
      ir_expr_t **args;
      ir_expr_t *next; /* the document's next intrinsic call (doc->intrs) */
    } intr;
    struct {
      ir_type_t *type;
      ir_expr_t *arg;
    } cast;
    struct {
      uint32_t n;
      ir_expr_t **items;
    } tuple;
    struct {
      const char *fn;
      struct ir_helper *helper;
      uint32_t nargs;
      ir_expr_t **args;
    } app;
    struct {
      const char *type;
      struct ir_record *def;
      uint32_t n;
      ir_field_init_t *fields;
    } record;
    struct {
      const char *type;
      const char *ctor;
      struct ir_ctor *def;
      uint32_t nargs;
      ir_expr_t **args;
    } variant;
    struct {
      ir_type_t *elt;
      ir_expr_t *size;
      ir_mem_t mem;
    } acreate;
    struct {
      ir_expr_t *cond, *then, *els;
    } cond;
    struct {
      ir_expr_t *scrut;
      uint32_t n;
      ir_ecase_t *cases;
    } match;
  } u;
};

typedef struct ir_lvalue {
  ir_lkind_t kind;
  const ir_path_t *path;
  union {
    struct {
      uint64_t id;
      const char *name;
      ir_var_t *decl;
    } var;
    struct {
      const char *array;
      ir_var_t *decl;
      ir_expr_t *index;
    } aelem;
    struct {
      ir_expr_t *base, *index;
    } aelemx;
    struct {
      struct ir_lvalue *target;
      const char *field;
    } field;
  } u;
} ir_lvalue_t;

/* Version 2's cooperative-matrix operations (SPOC's coopmat_op). */
typedef enum {
  IR_CM_DECL,
  IR_CM_LOAD,
  IR_CM_STORE,
  IR_CM_MULADD,
  IR_CM__N
} ir_cmkind_t;

/* A fragment's use, and the component types of fragments and configs. */
typedef enum { IR_CMU_A, IR_CMU_B, IR_CMU_ACC, IR_CMU__N } ir_cmuse_t;
typedef enum {
  IR_CMC_F16,
  IR_CMC_F32,
  IR_CMC_U8,
  IR_CMC_S8,
  IR_CMC_U32,
  IR_CMC_S32,
  IR_CMC__N
} ir_cmcomp_t;

typedef struct ir_cm_frag {
  ir_cmuse_t use;
  uint32_t m, n, k;
  ir_cmcomp_t comp;
  const char *scope; /* "subgroup" (the default) or what was given */
} ir_cm_frag_t;

typedef struct ir_cm_cfg {
  uint32_t m, n, k;
  ir_cmcomp_t a, b, c, result;
  int saturating;
  const char *scope;
} ir_cm_cfg_t;

extern const char *const ir_cm_use_names[IR_CMU__N];
extern const char *const ir_cm_comp_names[IR_CMC__N];

typedef struct ir_stmt {
  ir_skind_t kind;
  const ir_path_t *path;
  union {
    struct {
      ir_lvalue_t *target;
      ir_expr_t *value;
    } assign;
    struct {
      uint32_t n;
      struct ir_stmt **items;
    } seq;
    struct {
      ir_expr_t *cond;
      struct ir_stmt *then, *els; /* els may be NULL */
    } sif;
    struct {
      ir_expr_t *cond;
      struct ir_stmt *body;
    } swhile;
    struct {
      ir_var_t *var;
      ir_expr_t *from, *to;
      ir_dir_t dir;
      struct ir_stmt *body;
    } sfor;
    struct {
      ir_expr_t *scrut;
      uint32_t n;
      ir_scase_t *cases;
    } match;
    struct { /* return, expr */
      ir_expr_t *value;
    } ret;
    struct { /* let, letmut */
      ir_var_t *var;
      ir_expr_t *init;
      struct ir_stmt *body;
    } let;
    struct {
      uint32_t n;
      const char **hints;
      struct ir_stmt *body;
    } pragma;
    struct {
      struct ir_stmt *body;
    } block;
    struct {
      uint32_t n;
      const char **keys;
      const char **code;
      const ir_path_t **paths;
    } native;
    struct {
      ir_cmkind_t op;
      const char *frag;  /* decl: the fragment; load, muladd: dst; store: src */
      const char *array; /* load: src; store: dst */
      ir_var_t *decl;    /* the array's declaration (phase 3) */
      ir_expr_t *index, *stride;
      const char *a, *b, *c; /* muladd */
      ir_cm_frag_t f;        /* decl, load, store */
      ir_cm_cfg_t cfg;       /* muladd */
    } cm;
  } u;
} ir_stmt_t;

typedef struct ir_decl {
  ir_dkind_t kind;
  const ir_path_t *path;
  ir_var_t *var;   /* param, local; shared: named, type array(elt, shared) */
  int has_arrinfo; /* param */
  ir_type_t *elt;  /* param arrinfo, shared element */
  ir_mem_t mem;    /* param arrinfo */
  ir_expr_t *init; /* local: optional */
  ir_expr_t *size; /* shared: optional (NULL: dynamic shared memory) */
} ir_decl_t;

typedef struct ir_field {
  const char *name;
  ir_type_t *type;
  const ir_path_t *path;
} ir_field_t;

typedef struct ir_record {
  const char *name;
  const char *cname; /* mangled */
  uint32_t nfields;
  ir_field_t *fields;
  const ir_path_t *path;
  int mark; /* checker and generator graph walks */
} ir_record_t;

typedef struct ir_ctor {
  const char *name;
  uint32_t npayload;
  ir_type_t **payload;
  struct ir_variant *variant;
  uint32_t index;    /* the tag */
  const char *maker; /* "make_<T>_<C>" */
  const ir_path_t *path;
} ir_ctor_t;

typedef struct ir_variant {
  const char *name;
  const char *cname; /* mangled */
  uint32_t nctors;
  ir_ctor_t *ctors;
  const ir_path_t *path;
  int mark;
} ir_variant_t;

typedef struct ir_helper {
  const char *name;
  uint32_t nparams;
  ir_var_t **params;
  ir_type_t *ret;
  ir_stmt_t *body;
  const ir_path_t *path;
} ir_helper_t;

typedef struct ir_kernel {
  const char *name;
  uint32_t nparams;
  ir_decl_t **params;
  uint32_t nlocals;
  ir_decl_t **locals;
  ir_stmt_t *body;
  uint32_t nrecords;
  ir_record_t *records;
  uint32_t nvariants;
  ir_variant_t *variants;
  uint32_t nhelpers;
  ir_helper_t *helpers;
  const ir_path_t *path;
} ir_kernel_t;

/* How often each tag occurred in a document (the coverage test sums them
 * over the fixtures). */
typedef struct ir_stats {
  uint32_t tags[IR_TS__N][32];
} ir_stats_t;

typedef struct ir_doc {
  ir_arena_t *arena;
  uint64_t version;
  ir_kernel_t *kernel;
  ir_stats_t stats;
  ir_expr_t *intrs; /* every intrinsic call of the document, last first */
} ir_doc_t;

/* ----------------------------------------------------------------- limits */

typedef struct ir_limits {
  unsigned max_depth;  /* containers nested in one another */
  uint64_t max_values; /* msgpack values in the document */
  uint32_t max_array;  /* elements of one array */
  uint32_t max_map;    /* pairs of one map */
  size_t max_native;   /* bytes of one native code string */
  size_t max_hint;     /* bytes of one pragma hint */
  uint32_t max_defs;   /* helpers, record defs, variant defs each */
  size_t max_memory;   /* the document's arena */
} ir_limits_t;

/* The limits of proto/IR.md. */
void ir_limits_default(ir_limits_t *lim);

/* ---------------------------------------------------------------- decoding */

/*
 * Decode and validate the IR document @p bytes[0, len) (one msgpack map).
 * @p lim may be NULL for the defaults.
 * @return 0 with *@p out a new document (free it with ir_doc_free); or
 *         HIPD_EIR (or HIPD_ENOMEM) with @p err saying where and what, and
 *         *@p out NULL.
 */
int ir_decode(const void *bytes, size_t len, const ir_limits_t *lim,
              ir_doc_t **out, ir_error_t *err);
void ir_doc_free(ir_doc_t *doc);

/* ------------------------------------------------------------------- names */

/* Is @p s a C++ keyword (C++20, plus restrict)? */
int ir_is_keyword(const char *s);
/* Is @p type a scalar: i32 i64 f32 f64 bool? */
int ir_type_is_scalar(const ir_type_t *type);
/* Structural equality of two (resolved) types. */
int ir_type_equal(const ir_type_t *a, const ir_type_t *b);
/* The type's tag, for messages ("i32", "record Geo.point"...). */
const char *ir_type_describe(const ir_type_t *type, char *buf, size_t size);

#endif
