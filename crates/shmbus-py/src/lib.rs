//! The native half of the `shmbus` Python package (`shmbus._shmbus`): every channel kind,
//! the WaitSet, the journal and async receive, over the public `shmbus` Rust API. The Python-facing
//! documentation is `docs/python.md`; the package's pure-Python half re-exports this module.
//!
//! How a Python object owns a Rust endpoint and lends zero-copy items is in `cell.rs`; how
//! those items export their bytes through the buffer protocol in `held.rs`; how blocking
//! calls release the GIL and stay interruptible in `block.rs`; the methods every handle,
//! endpoint and lent item shares in `methods.rs`; how asyncio awaits a receive in `async.rs`.

mod r#async;
mod block;
mod cell;
mod copy;
mod dlpack;
mod domain;
mod errors;
mod held;
mod journal;
mod methods;
mod pool;
mod queue;
mod schema;
mod service;
mod stream;
mod topic;
mod waitset;
mod watch;

use pyo3::prelude::*;

#[pymodule]
fn _shmbus(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<domain::PyDomain>()?;
    m.add_class::<schema::PySchema>()?;
    m.add_class::<topic::PyTopic>()?;
    m.add_class::<topic::PyPublisher>()?;
    m.add_class::<topic::PyLoan>()?;
    m.add_class::<topic::PySubscriber>()?;
    m.add_class::<topic::PySample>()?;
    m.add_class::<topic::PyMessage>()?;
    m.add_class::<queue::PyQueue>()?;
    m.add_class::<queue::PyProducer>()?;
    m.add_class::<queue::PyConsumer>()?;
    m.add_class::<stream::PyStream>()?;
    m.add_class::<stream::PyStreamWriter>()?;
    m.add_class::<stream::PyStreamLoan>()?;
    m.add_class::<stream::PyStreamReader>()?;
    m.add_class::<stream::PyRecord>()?;
    m.add_class::<pool::PyPool>()?;
    m.add_class::<pool::PyDispatcher>()?;
    m.add_class::<pool::PyDispatched>()?;
    m.add_class::<pool::PyLostJob>()?;
    m.add_class::<pool::PyWorker>()?;
    m.add_class::<pool::PyJob>()?;
    m.add_class::<pool::PyJobRef>()?;
    m.add_class::<service::PyService>()?;
    m.add_class::<service::PyClient>()?;
    m.add_class::<service::PyServer>()?;
    m.add_class::<service::PyRequest>()?;
    m.add_class::<service::PyResponse>()?;
    m.add_class::<service::PyResponseRef>()?;
    m.add_class::<service::PyRequestLoan>()?;
    m.add_class::<service::PyResponseLoan>()?;
    m.add_class::<journal::PyJournal>()?;
    m.add_class::<journal::PyAppender>()?;
    m.add_class::<journal::PyJournalLoan>()?;
    m.add_class::<journal::PyTailer>()?;
    m.add_class::<journal::PyEntry>()?;
    m.add_class::<journal::PyEntryRef>()?;
    m.add_class::<waitset::PyWaitSet>()?;
    m.add_class::<watch::PyDomainWatch>()?;
    m.add_class::<watch::PyDomainEvent>()?;
    m.add_function(wrap_pyfunction!(waitset::wait_async, m)?)?;
    m.add_function(wrap_pyfunction!(waitset::poll_wait, m)?)?;
    m.add_class::<r#async::PyRegistration>()?;
    m.add_class::<r#async::PyLoopWaker>()?;
    m.add_class::<r#async::PyWake>()?;
    Ok(())
}
