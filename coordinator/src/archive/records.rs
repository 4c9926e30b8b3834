//! The archive's values that are not columns: protobuf messages (prost),
//! so that what one version of the coordinator archived the next reads
//! (fields are added, never renumbered).

use prost::Message;

use super::backend::{Archived, Error, Result};
use crate::results::Median;

#[derive(Clone, PartialEq, Message)]
pub struct StoredCells {
    #[prost(message, repeated, tag = "1")]
    pub cells: Vec<farm_proto::Cell>,
}

#[derive(Clone, PartialEq, Message)]
pub struct StoredMedian {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub unit: String,
    #[prost(double, tag = "3")]
    pub value: f64,
}

#[derive(Clone, PartialEq, Message)]
pub struct StoredMedians {
    #[prost(message, repeated, tag = "1")]
    pub medians: Vec<StoredMedian>,
}

pub fn cells(cells: &[crate::cell::Cell]) -> Vec<u8> {
    StoredCells {
        cells: crate::cell::wire(cells),
    }
    .encode_to_vec()
}

pub fn cells_of(bytes: &[u8]) -> Result<Vec<farm_proto::Cell>> {
    Ok(decode::<StoredCells>(bytes, "cells")?.cells)
}

pub fn medians(medians: &[Median]) -> Vec<u8> {
    StoredMedians {
        medians: medians
            .iter()
            .map(|m| StoredMedian {
                name: m.name.clone(),
                unit: m.unit.clone(),
                value: m.value,
            })
            .collect(),
    }
    .encode_to_vec()
}

pub fn medians_of(bytes: &[u8]) -> Result<Vec<Median>> {
    Ok(decode::<StoredMedians>(bytes, "series point")?
        .medians
        .into_iter()
        .map(|m| Median {
            name: m.name,
            unit: m.unit,
            value: m.value,
        })
        .collect())
}

pub fn decode<M: Message + Default>(bytes: &[u8], what: &str) -> Result<M> {
    M::decode(bytes).map_err(|source| Error::Decode {
        what: what.to_owned(),
        source,
    })
}

/// A u64 as the signed 64-bit integer both databases store; seqs and unix
/// milliseconds are far below its limit, and one beyond is refused rather
/// than wrapped into a wrong order.
pub fn int(what: &'static str, value: u64) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::OutOfRange { what, value })
}

/// An archived run as `GetResults` lists it.
pub fn run(
    run_id: String,
    cell_index: u32,
    repetition: u32,
    agent_id: String,
    result: Option<Vec<u8>>,
) -> Result<farm_proto::RunRecord> {
    let result = match result {
        Some(bytes) => Some(decode::<farm_proto::RunResult>(
            &bytes,
            &format!("result of run {run_id}"),
        )?),
        None => None,
    };
    Ok(farm_proto::RunRecord {
        run_id,
        cell_index,
        repetition,
        agent_id,
        result,
    })
}

/// An archived matrix from its stored values and its ended runs.
pub fn archived(
    cells: &[u8],
    status: &[u8],
    summary: &[u8],
    runs: Vec<farm_proto::RunRecord>,
) -> Result<Archived> {
    let status = decode::<farm_proto::MatrixStatus>(status, "matrix status")?;
    let mut results = decode::<farm_proto::GetResultsResponse>(summary, "summaries")?;
    results.status = Some(status.clone());
    results.runs = runs;
    Ok(Archived {
        status,
        results,
        cells: cells_of(cells)?,
    })
}
