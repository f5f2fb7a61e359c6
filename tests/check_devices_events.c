/* SPDX-License-Identifier: MIT */
/* tests/check_devices_events.c: events on every device (recorded,
 * waited for, timed, recorded again on another stream or while a read
 * waits) and the profile of a session. The shared helpers are in
 * tests/lib/devices_util.h. */
#include "config.h"

#include "devices_util.h"
#include "run.h"

/* ----------------------------------------------------------------- events */

START_TEST(test_events)
{
  const size_t big = 64 * MiB;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_event_t start = HIPD_EVENT_NULL, stop = HIPD_EVENT_NULL,
                 elsewhere = HIPD_EVENT_NULL;
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
    float ms = -1;
    int done = -1;

    OK(conn, hipd_event_create(conn, dev, &start));
    OK(conn, hipd_event_create(conn, dev, &stop));
    ck_assert_uint_ne(hipd_event_id(start), 0);
    ck_assert_uint_ne(hipd_event_id(start), hipd_event_id(stop));
    EXPECT(conn, hipd_event_query(conn, start, &done), HIPD_ENOTRECORDED);
    EXPECT(conn, hipd_event_synchronize(conn, start), HIPD_ENOTRECORDED);
    EXPECT(conn, hipd_event_elapsed(conn, start, stop, &ms), HIPD_ENOTRECORDED);

    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_mem_alloc(conn, dev, big, "byte", &buf));
    OK(conn, hipd_event_record(conn, start, st));
    /* Only one of the two recorded yet. */
    EXPECT(conn, hipd_event_elapsed(conn, start, stop, &ms), HIPD_ENOTRECORDED);
    OK(conn, hipd_mem_memset_async(conn, buf, 0, big, 0x42, st));
    OK(conn, hipd_event_record(conn, stop, st));
    OK(conn, hipd_event_synchronize(conn, stop));
    OK(conn, hipd_event_query(conn, stop, &done));
    ck_assert_int_eq(done, 1);
    OK(conn, hipd_event_query(conn, start, &done));
    ck_assert_int_eq(done, 1);
    OK(conn, hipd_event_elapsed(conn, start, stop, &ms));
    ck_assert_msg(ms >= 0.0f, "device %d: elapsed %f ms", dev, (double)ms);

    /* Stream 0: the default stream of the event's device. */
    OK(conn, hipd_event_record(conn, start, HIPD_STREAM_NULL));
    OK(conn, hipd_event_synchronize(conn, start));
    OK(conn, hipd_event_query(conn, start, &done));
    ck_assert_int_eq(done, 1);

    /* Two events of different devices cannot be compared. */
    OK(conn, hipd_event_create(conn, (dev + 1) % n, &elsewhere));
    OK(conn, hipd_event_record(conn, elsewhere, HIPD_STREAM_NULL));
    OK(conn, hipd_event_synchronize(conn, elsewhere));
    EXPECT(conn, hipd_event_elapsed(conn, start, elsewhere, &ms), HIPD_EINVAL);

    OK(conn, hipd_event_destroy(conn, start));
    EXPECT(conn, hipd_event_query(conn, start, &done), HIPD_ESTALE);
    EXPECT(conn, hipd_event_destroy(conn, start), HIPD_ESTALE);
    OK(conn, hipd_event_destroy(conn, stop));
    OK(conn, hipd_event_destroy(conn, elsewhere));
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, buf));
  }
  hipd_close(conn);
}
END_TEST

/* -------------------------------------------------------------- profiling */

/* The first record of @p op, or -1. */
static int find_record(const hipd_info_t *prof, const char *op)
{
  int n = hipd_info_len(prof, "records");

  for (int i = 0; i < n; i++) {
    char path[64];
    const char *s;
    size_t len;
    snprintf(path, sizeof(path), "records.%d.op", i);
    if (hipd_info_str(prof, path, &s, &len) == 0 && strcmp(s, op) == 0)
      return i;
  }
  return -1;
}

START_TEST(test_profile)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t data[4096], back[4096];

  memset(data, 0x5f, sizeof(data));
  for (dev = 0; dev < n; dev++) {
    hipd_info_t *prof = NULL;
    hipd_buffer_t buf = HIPD_BUFFER_NULL, buf2 = HIPD_BUFFER_NULL;
    hipd_stream_t def = HIPD_STREAM_NULL;
    int records, w, r;

    OK(conn, hipd_stream_default(conn, dev, &def));
    OK(conn, hipd_mem_alloc(conn, dev, 4096, "byte", &buf));
    OK(conn, hipd_mem_alloc(conn, dev, 4096, "byte", &buf2));
    OK(conn, hipd_session_profile(conn, 0, &prof));
    ck_assert_int_eq(info_bool(prof, "enabled"), 0);
    ck_assert_int_eq(hipd_info_len(prof, "records"), 0);
    hipd_info_free(prof);

    OK(conn, hipd_profile_enable(conn));
    OK(conn, hipd_mem_write(conn, buf, 0, data, 4096));
    OK(conn, hipd_mem_read(conn, buf, 0, back, 1000));
    OK(conn, hipd_mem_memset(conn, buf2, 0, 300, 1));
    OK(conn, hipd_mem_copy(conn, buf2, 0, buf, 0, 200));
    OK(conn, hipd_session_profile(conn, 1, &prof));
    ck_assert_int_eq(info_bool(prof, "enabled"), 1);
    ck_assert_int_eq(info_int(prof, "dropped"), 0);
    records = hipd_info_len(prof, "records");
    ck_assert_int_ge(records, 4);
    w = find_record(prof, "mem.write");
    r = find_record(prof, "mem.read");
    ck_assert_msg(w >= 0 && r >= 0, "device %d: no write or read record", dev);
    ck_assert_int_ge(find_record(prof, "mem.memset"), 0);
    ck_assert_int_ge(find_record(prof, "mem.copy"), 0);
    for (int i = 0; i < records; i++) {
      char a[64], b[64];
      snprintf(a, sizeof(a), "records.%d.start_ms", i);
      snprintf(b, sizeof(b), "records.%d.end_ms", i);
      ck_assert_msg(info_double(prof, b) >= info_double(prof, a),
                    "device %d: record %d ends before it starts", dev, i);
      ck_assert(info_double(prof, a) >= 0);
      /* The sync transfers ran on the default stream. Handles can pass
       * INT64_MAX, which hipd_info_int() cannot return: compare as
       * doubles, which round the same way on both sides. */
      snprintf(a, sizeof(a), "records.%d.stream", i);
      ck_assert_msg(info_double(prof, a) == (double)hipd_stream_id(def),
                    "device %d: record %d names another stream", dev, i);
    }
    {
      char path[64];
      snprintf(path, sizeof(path), "records.%d.bytes", w);
      ck_assert_int_eq(info_int(prof, path), 4096);
      snprintf(path, sizeof(path), "records.%d.bytes", r);
      ck_assert_int_eq(info_int(prof, path), 1000);
    }
    hipd_info_free(prof);
    /* Cleared. */
    OK(conn, hipd_session_profile(conn, 0, &prof));
    ck_assert_int_eq(hipd_info_len(prof, "records"), 0);
    hipd_info_free(prof);

    OK(conn, hipd_profile_disable(conn));
    OK(conn, hipd_mem_write(conn, buf, 0, data, 4096));
    OK(conn, hipd_session_profile(conn, 0, &prof));
    ck_assert_int_eq(info_bool(prof, "enabled"), 0);
    ck_assert_int_eq(hipd_info_len(prof, "records"), 0);
    hipd_info_free(prof);
    OK(conn, hipd_mem_free(conn, buf));
    OK(conn, hipd_mem_free(conn, buf2));
  }
  hipd_close(conn);
}
END_TEST

/* An event recorded on two streams follows the later record (PROTOCOL.md,
 * Events), even when the stream of the earlier record reaches its mark
 * last: here that stream is busy for a while, the other idle. Its time is
 * the later record's: between `start` and `after`, recorded just before
 * and after it on the idle stream, and it stays so once the busy stream
 * has passed the earlier mark too. */
START_TEST(test_event_latest_record)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_event_t start = HIPD_EVENT_NULL, ev = HIPD_EVENT_NULL,
                 after = HIPD_EVENT_NULL;
    hipd_stream_t idle = HIPD_STREAM_NULL;
    hipd_call_t *early = NULL;
    float ms = -1;
    int done = -1;
    busy_t busy;

    OK(conn, hipd_event_create(conn, dev, &start));
    OK(conn, hipd_event_create(conn, dev, &ev));
    OK(conn, hipd_event_create(conn, dev, &after));
    OK(conn, hipd_stream_create(conn, dev, &idle));
    busy_start(&busy, conn, dev);
    /* Answered once the busy stream reaches it: do not wait. */
    OK(conn, hipd_event_record_begin(conn, ev, busy.st, &early));
    OK(conn, hipd_event_record(conn, start, idle));
    OK(conn, hipd_event_record(conn, ev, idle)); /* the latest record */
    OK(conn, hipd_event_record(conn, after, idle));
    OK(conn, hipd_event_synchronize(conn, ev));
    OK(conn, hipd_event_synchronize(conn, after));
    /* Now the busy stream passes the earlier mark as well. */
    OK(conn, hipd_wait(early));
    OK(conn, hipd_stream_synchronize(conn, busy.st));
    busy_finish(&busy, dev);

    OK(conn, hipd_event_query(conn, ev, &done));
    ck_assert_int_eq(done, 1);
    OK(conn, hipd_event_elapsed(conn, start, ev, &ms));
    ck_assert_msg(ms >= 0.0f, "device %d: start -> event: %f ms", dev,
                  (double)ms);
    OK(conn, hipd_event_elapsed(conn, ev, after, &ms));
    ck_assert_msg(ms >= 0.0f,
                  "device %d: event -> after: %f ms (the event kept the "
                  "earlier record's time)",
                  dev, (double)ms);

    OK(conn, hipd_event_destroy(conn, start));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_event_destroy(conn, after));
    OK(conn, hipd_stream_destroy(conn, idle));
  }
  hipd_close(conn);
}
END_TEST

/* One thread records an event again and again while another asks for its
 * time: each answer is a time or ENOTREADY (a record was pending), and the
 * daemon never reads the event's time while a stream writes it (which
 * scripts/sanitize.sh tsan checks).
 * The records go on the ring, the elapsed calls on the socket, and the
 * client does not spin: a recording thread that finds the daemon asleep
 * wants the socket to kick it while the other thread reads it, and that
 * reader may take the record's answer first. The recorder then leaves the
 * socket to its reader: it once cleared io_busy under it, so that both
 * read and one slept through its own answer (a hang here, in CI). libhipd
 * breaks the connection with EINTERNAL when its reader finds io_busy
 * cleared, so that the calls below fail if it happens again (6 runs of 6
 * failed without the fix). */
typedef struct {
  hipd_conn_t *conn;
  hipd_event_t ev;
  hipd_stream_t st;
  int rounds, rc;
  char why[256];
} rerecord_t;

static void *rerecord_main(void *arg)
{
  rerecord_t *r = arg;

  for (int i = 0; i < r->rounds && r->rc == 0; i++)
    if ((r->rc = hipd_event_record(r->conn, r->ev, r->st)) != 0)
      snprintf(r->why, sizeof(r->why), "record %d: %s", i,
               hipd_last_error(r->conn));
  return NULL;
}

START_TEST(test_event_record_while_read)
{
  enum { ROUNDS = 1000 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  hipd_set_busy_poll(conn, 0);

  for (dev = 0; dev < n; dev++) {
    hipd_event_t start = HIPD_EVENT_NULL, ev = HIPD_EVENT_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
    rerecord_t r;
    pthread_t thread;
    float ms = -1;

    OK(conn, hipd_event_create(conn, dev, &start));
    OK(conn, hipd_event_create(conn, dev, &ev));
    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_event_record(conn, start, st));
    OK(conn, hipd_event_record(conn, ev, st));
    OK(conn, hipd_event_synchronize(conn, ev));
    r = (rerecord_t){.conn = conn, .ev = ev, .st = st, .rounds = ROUNDS};
    ck_assert_int_eq(pthread_create(&thread, NULL, rerecord_main, &r), 0);
    for (int i = 0; i < ROUNDS; i++) {
      int rc = hipd_event_elapsed(conn, start, ev, &ms);
      ck_assert_msg(rc == 0 || rc == HIPD_ENOTREADY,
                    "device %d: event.elapsed: %s (%s)", dev,
                    hipd_err_name(rc), hipd_last_error(conn));
      if (rc == 0)
        ck_assert_msg(ms >= 0.0f, "device %d: elapsed %f ms", dev, (double)ms);
    }
    pthread_join(thread, NULL);
    ck_assert_msg(r.rc == 0, "device %d: event.record: %s (%s)", dev,
                  hipd_err_name(r.rc), r.why);
    OK(conn, hipd_event_destroy(conn, start));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_stream_destroy(conn, st));
  }
  hipd_close(conn);
}
END_TEST

static Suite *devices_events_suite(void)
{
  Suite *s = suite_create("devices_events");
  TCase *tc;

  tc = tcase_create("events");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_events);
  tcase_add_test(tc, test_event_latest_record);
  tcase_add_test(tc, test_event_record_while_read);
  tcase_add_test(tc, test_profile);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_devices_events");
  failed = test_run(devices_events_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
